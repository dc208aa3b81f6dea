"""bench/knowledge_accuracy.py: the question set's shape, and how answers are scored at a relevance bar."""

from __future__ import annotations

from collections import Counter

from bench.knowledge_accuracy import QUESTIONS, Answer, Question, accuracy, questions_load
from releases.management.commands.seed_demo import help_centre_folder


def test_the_question_set_is_in_three_equal_languages_a_third_unanswerable_and_names_real_articles():
    questions = questions_load(QUESTIONS)

    assert len(questions) >= 150
    assert Counter(q.lang for q in questions) == {language: len(questions) // 3 for language in ("pt", "en", "es")}
    assert sum(not q.article for q in questions) * 3 == len(questions)
    for question in questions:
        if question.article:
            assert (help_centre_folder(question.profile) / question.lang / question.article).is_file(), question


def test_an_answer_counts_as_cited_only_when_its_first_article_above_the_bar_is_the_right_one():
    questions = [
        Question("p", "en", "right and above", "a.md"),
        Question("p", "en", "right but below", "a.md"),
        Question("p", "en", "wrong first above", "a.md"),
        Question("p", "en", "nothing found", "a.md"),
    ]
    answers = [
        Answer((("a.md", 0.5), ("b.md", 0.4))),
        Answer((("a.md", 0.1),)),
        Answer((("b.md", 0.6), ("a.md", 0.5))),
        Answer(()),
    ]

    figures = accuracy(questions, answers, bar=0.2)

    assert (figures.answerable, figures.rank_1, figures.cited, figures.kept) == (4, 2, 1, 2)


def test_an_unanswerable_question_is_refused_only_when_no_passage_is_above_the_bar():
    questions = [Question("p", "pt", "x", None), Question("p", "pt", "y", None), Question("p", "pt", "z", None)]
    answers = [Answer(()), Answer((("a.md", 0.2),)), Answer((("a.md", 0.21),))]

    figures = accuracy(questions, answers, bar=0.2)

    assert (figures.unanswerable, figures.refused) == (3, 2)
