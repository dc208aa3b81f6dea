"""The answer's limit (``ANSWER_MAX_CHARS``) on what a turn streams, whatever its models write: the text of its answer
as it is written (``token`` events) and each supervisor part's answer (``partial``); and its cuts, recorded once
(:func:`answer_cut_recorded`).

The stored answer is cut by the graph (:func:`conversations.graph.output_guardrails`): its start and the marker
(:func:`common.sizes.text_cut`), within the limit, the cut recorded in ``metadata.limits``. A stream cannot know how
long a model's text will be when it passes the limit, nor whether the review will add its note after it (an answer
that changed something and failed the judges: :func:`conversations.graph.answer_noted`, which cuts the answer to make
the note's room), so it sends at most :func:`stream_room` characters of it, the limit less the longest marker and the
longest note: what a client received is then the start of the stored answer, note or not, and a face that sends the
rest once the turn is stored (the OpenAI-compatible faces) sends exactly what is stored. A model that writes on is
still read to its end (its usage is counted), its text past the room sent nowhere.
"""

from __future__ import annotations

import functools
from typing import Any

from common.events import Emit
from common.language import LANGUAGES
from common.sizes import CUT_MARK, limit_hit, text_cut
from conversations.judges import review_note
from conversations.turn import LIMIT_ANSWER

MARK_ROOM = len(CUT_MARK.format(dropped=10**15))  # the longest marker a cut answer carries
NOTE_GAP = "\n\n"  # between an answer and a note after it


@functools.cache  # three languages' catalogues, read once for the process
def note_room() -> int:
    """The most characters the review's note takes after an answer: the gap and the note in its longest language."""
    return max(len(NOTE_GAP + review_note(language)) for language in LANGUAGES)


def stream_room(limit: int) -> int:
    """The most characters of an answer's text a stream sends under an answer's ``limit``: what the stored answer
    keeps of it whether it is cut (its marker's room) and noted (the note's) or not."""
    return max(limit - MARK_ROOM - note_room(), 0)


def answer_stream_bounded(emit: Emit | None, limit: int) -> Emit | None:
    """``emit`` with the text of each answer (``token`` events, counted since the last ``discard``: clients drop what
    an agent streamed before one) sent up to :func:`stream_room` characters, the rest dropped, and each ``partial``'s
    answer cut to ``limit`` with the marker. Other events pass as they are; ``None`` (no stream) stays ``None``."""
    if emit is None:
        return None
    room = stream_room(limit)
    sent = 0

    async def bounded(event: str, data: dict[str, Any]) -> None:
        nonlocal sent
        if event == "discard":
            sent = 0
        elif event == "token":
            text = str(data.get("text") or "")[: max(room - sent, 0)]
            if not text:
                return
            sent += len(text)
            data = {**data, "text": text}
        elif event == "partial" and isinstance(data.get("answer"), str):
            data = {**data, "answer": text_cut(data["answer"], limit)}
        await emit(event, data)

    return bounded


def answer_cut_recorded(limits: list[dict[str, Any]], *, limit: int, asked: int, ran: int) -> list[dict[str, Any]]:
    """``limits`` (``metadata.limits``) with a cut of the answer to ``limit`` recorded as ``answer_chars``: cut again
    (its text put into a format, after the answer was cut), the one entry says what was asked the most and what
    ran last."""
    earlier = [hit["asked"] for hit in limits if hit["limit"] == LIMIT_ANSWER]
    kept = [hit for hit in limits if hit["limit"] != LIMIT_ANSWER]
    return [*kept, limit_hit(LIMIT_ANSWER, "ANSWER_MAX_CHARS", limit, max([asked, *earlier]), ran)]
