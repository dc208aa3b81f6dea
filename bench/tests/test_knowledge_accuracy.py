"""bench/knowledge_accuracy.py: the question set's shape, how answers are scored at a relevance bar, what a turn's
answer counts as, and the rarity-weighted relevance it measures against coverage."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

from bench.knowledge_accuracy import (
    FOLLOW_UPS,
    QUESTIONS,
    Answer,
    Question,
    ThreadTurn,
    TurnSeen,
    accuracy,
    cosines_report,
    follow_ups_load,
    follow_ups_report,
    idf_coverage,
    questions_load,
    scratch_removed,
    turn_misses,
    turn_report,
    turn_sections,
)
from releases.management.commands.seed_demo import help_centre_folder

UNSEEN = QUESTIONS.parents[1] / "unseen" / "knowledge" / "questions.yaml"


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


def seen(agent: str = "support_agent", *, searched: bool = True, unknown: bool = False) -> TurnSeen:
    return TurnSeen(agent, "", searched, (), unknown, "answer")


def test_at_a_turn_the_first_citation_counts_and_an_unanswerable_question_is_refused_by_citing_nothing():
    questions = [
        Question("p", "pt", "right", "a.md"),
        Question("p", "pt", "wrong first", "a.md"),
        Question("p", "en", "not searched", "a.md"),
        Question("p", "en", "refused", None),
        Question("q", "es", "cited anyway", None),
    ]
    answers = [
        (Answer((("a.md", 0.5),)), seen()),
        (Answer((("b.md", 1.0), ("a.md", 0.9))), seen()),
        (Answer(()), seen("billing_agent", searched=False)),
        (Answer(()), seen(unknown=True)),
        (Answer((("a.md", 0.5),)), seen()),
    ]
    lines: list[str] = []

    figures = turn_report(questions, answers, write=lines.append)

    assert (figures["all"].answerable, figures["all"].cited, figures["all"].kept) == (3, 1, 2)
    assert (figures["all"].unanswerable, figures["all"].refused) == (2, 1)
    assert (figures["pt"].cited, figures["en"].cited, figures["es"].refused) == (1, 0, 0)
    missed = turn_misses(questions, answers)
    assert [line.split("'")[1] for line in missed] == ["wrong first", "not searched", "cited anyway"]
    assert "billing_agent (no intent), did not search, no tool" in missed[1]


def test_each_question_cited_right_is_listed_with_the_section_its_answer_quotes_to_be_read_against_the_question():
    questions = [
        Question("p", "pt", "right", "a.md"),
        Question("p", "en", "wrong", "a.md"),
        Question("p", "es", "refused", None),
    ]
    answers = [
        (Answer((("a.md", 0.5),)), replace(seen(), section="A › Refunds")),
        (Answer((("b.md", 0.5),)), replace(seen(), section="B › Delivery")),
        (Answer(()), seen()),
    ]

    assert turn_sections(questions, answers) == ["  [pt p] 'right': A › Refunds"]


def test_rarity_weighs_a_word_the_knowledge_holds_in_few_passages_above_a_common_one():
    stems = {"fatur": 90, "segun": 2}  # of 100 passages

    rare_held = idf_coverage("fatura segunda", "A segunda via sai no app.", stems, 100)
    common_held = idf_coverage("fatura segunda", "A fatura chega por e-mail.", stems, 100)

    assert math.isclose(rare_held + common_held, 1.0)
    assert rare_held > 0.8 > 0.2 > common_held


def test_a_question_file_naming_its_profile_once_and_its_articles_with_their_folder_loads_as_the_demo_set_does():
    questions = questions_load(UNSEEN)
    folder = UNSEEN.parent / "articles"

    assert {q.profile for q in questions} == {"telecom_contas"}
    for question in questions:
        if question.article:
            assert "/" not in question.article
            assert any((folder / language / question.article).is_file() for language in ("pt", "en", "es"))
    assert sum(not q.article for q in questions) * 3 == len(questions)


def test_the_cosines_report_spreads_each_side_and_counts_each_at_or_above_every_hundredth():
    questions = [
        Question("p", "en", "answered high", "a.md"),
        Question("p", "en", "answered low, another article best", "a.md"),
        Question("p", "en", "not answered", None),
        Question("p", "pt", "respondida", "b.md"),
        Question("p", "pt", "sem resposta", None),
    ]
    best = [(0.9, "a.md"), (0.8, "c.md"), (0.85, "a.md"), (0.88, "b.md"), (0.82, "b.md")]
    lines: list[str] = []

    cosines_report(questions, best, write=lines.append)

    assert "  en   answerable   (  2): 0.800 / 0.810 / 0.825 / 0.850 / 0.875 / 0.890 / 0.900" in lines
    assert "  en   the best passage of the answerable one's article:  50.0 %" in lines
    assert "  all  the best passage of the answerable one's article:  66.7 %" in lines
    assert not any(line.startswith("  es ") for line in lines)  # no question in Spanish
    rows = {line[:4]: line[5:].split() for line in lines if line[:2] == "0."}
    assert list(rows) == [f"0.{n}" for n in range(80, 91)]
    # pt, en, all: answerable / unanswerable at or above the bar
    assert " ".join(rows["0.85"]) == "100.0 % / 0.0 % 50.0 % / 100.0 % 66.7 % / 50.0 %"
    assert " ".join(rows["0.90"]) == "0.0 % / 0.0 % 50.0 % / 0.0 % 33.3 % / 0.0 %"


def test_the_follow_up_set_opens_each_conversation_with_a_question_in_three_equal_languages_naming_real_articles():
    threads = follow_ups_load(FOLLOW_UPS)

    assert Counter(thread.lang for thread in threads) == {
        language: len(threads) // 3 for language in ("pt", "en", "es")
    }
    assert all(thread.turns[0][0] == "first" and len(thread.turns) >= 2 for thread in threads)
    assert {kind for thread in threads for kind, _, _ in thread.turns[1:]} == {
        "follow_up",
        "unanswerable",
        "topic_change",
        "thanks",
    }
    for thread in threads:
        for kind, text, article in thread.turns:
            assert (article is None) == (kind in ("unanswerable", "thanks")) or kind == "topic_change", text
            if article:
                assert (help_centre_folder(thread.profile) / thread.lang / article).is_file(), text


def test_a_follow_up_turn_counts_by_its_kind_and_a_wrong_one_is_listed_with_what_it_cited():
    (thread,) = [thread for thread in follow_ups_load(FOLLOW_UPS) if thread.turns[1][0] == "follow_up"][:1]
    turns = [
        ThreadTurn(thread, 0, right=True, in_language=True, cited=thread.turns[0][2] or "", answer="…"),
        ThreadTurn(thread, 1, right=False, in_language=False, cited="nothing", answer="I don't know"),
    ]
    lines: list[str] = []

    follow_ups_report(turns, write=lines.append, listed=True)

    rows = {line.split()[0]: line for line in lines if line and line.split()[0] in ("first", "follow_up")}
    assert "1 /   1 100.0 %" in rows["first"] and rows["first"].endswith("1 / 1")
    assert "0 /   1   0.0 %" in rows["follow_up"] and rows["follow_up"].endswith("0 / 1")
    assert any("cited nothing (another language)" in line and thread.turns[1][1] in line for line in lines)


def test_a_runs_scratch_database_and_its_journal_files_are_removed_and_nothing_else(tmp_path: Path):
    database = tmp_path / "knowledge-accuracy-x.sqlite3"
    kept = tmp_path / "knowledge-accuracy-y.sqlite3"
    for path in (database, tmp_path / f"{database.name}-wal", tmp_path / f"{database.name}-shm", kept):
        path.write_bytes(b"rows")

    scratch_removed(database)
    scratch_removed(database)  # a second call finds nothing and says nothing

    assert sorted(path.name for path in tmp_path.iterdir()) == [kept.name]
