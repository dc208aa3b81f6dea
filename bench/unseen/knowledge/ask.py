"""Ask the held-out knowledge questions through the message API and score what customers got.

Each question of questions.yaml is sent as a customer's first message (a fresh session, no context) to its
profile through ``POST /api/gateway/message``, the documented face, and scored on the answer's
``metadata.knowledge``: an answerable question is *cited right* when the answer's first citation is the
question's article (by title); an unanswerable one is *uncited* when the answer cites nothing.

    python3 bench/unseen/knowledge/ask.py --url http://127.0.0.1:8000 --key "$KEY" [--list] [--json OUT]
"""

import argparse
import json
import pathlib
import sys
import urllib.request
import uuid

import yaml

HERE = pathlib.Path(__file__).resolve().parent


def ask(url: str, key: str, profile: str, text: str) -> dict:
    """One customer's first message; the API's JSON answer."""
    body = {
        "agent_id": profile,
        "payload": {"text": text, "session_id": f"heldout-kb-{uuid.uuid4().hex[:12]}"},
    }
    request = urllib.request.Request(
        f"{url}/api/gateway/message",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", required=True)
    parser.add_argument("--questions", default=str(HERE / "questions.yaml"))
    parser.add_argument("--list", action="store_true", help="print each miss")
    parser.add_argument("--json", help="write every question's outcome here")
    args = parser.parse_args()

    spec = yaml.safe_load(pathlib.Path(args.questions).read_text(encoding="utf-8"))
    titles = spec["articles"]
    counts: dict[str, dict[str, int]] = {}
    rows = []
    for q in spec["questions"]:
        reply = ask(args.url, args.key, spec["profile"], q["text"])
        metadata = reply.get("metadata") or {}
        knowledge = metadata.get("knowledge") or {}
        citations = knowledge.get("citations") or []
        first = citations[0]["title"] if citations else None
        expected = titles[q["article"]] if q["article"] else None
        ok = (first == expected) if expected else (first is None)
        kind = "answerable" if expected else "unanswerable"
        for lang in (q["lang"], "all"):
            bucket = counts.setdefault(f"{kind}:{lang}", {"ok": 0, "n": 0})
            bucket["n"] += 1
            bucket["ok"] += ok
        row = {
            "id": q["id"],
            "lang": q["lang"],
            "text": q["text"],
            "expected": expected,
            "cited": first,
            "ok": ok,
            "agent": reply.get("agent"),
            "language": metadata.get("language"),
            "unknown": bool(knowledge.get("unknown")),
            "searched": bool(knowledge),
            "retrieved": [(r.get("title"), round(r.get("score") or 0, 2)) for r in knowledge.get("retrieved") or []],
            "answer": reply.get("answer", ""),
        }
        rows.append(row)
        if args.list and not ok:
            print(f"MISS {q['id']} ({row['agent']}, searched={row['searched']}): {q['text']!r}")
            print(f"     expected {expected!r}, cited {first!r}; retrieved {row['retrieved'][:3]}")
            print(f"     answer: {row['answer'][:200]!r}")
    for kind, label in (("answerable", "cited right"), ("unanswerable", "unanswerable uncited")):
        parts = []
        for lang in ("pt", "en", "es", "all"):
            bucket = counts.get(f"{kind}:{lang}", {"ok": 0, "n": 0})
            share = 100.0 * bucket["ok"] / bucket["n"] if bucket["n"] else 0.0
            parts.append(f"{lang} {bucket['ok']}/{bucket['n']} ({share:.1f} %)")
        print(f"{label}: " + "; ".join(parts))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
