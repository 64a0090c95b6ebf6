"""Writes the memory-recall dataset (deterministic: same output on every run).

    python3 bench/data/memory-recall/generate.py

Four months of one agent's memory as Onyx writes it: daily logs (`memory/YYYY-MM-DD.md`, a
`# day` heading, then one bullet per conversation turn in the runtime's format), MEMORY.md
(curated facts) and a few documents under `memory/docs/`. The facts come from `facts.py`; this
script places them among small talk on the same topics, then writes `files/…` and
`questions.jsonl`: one question per line, `{"id", "kind", "question", "evidence": [{"path",
"start", "end"}]}` with 1-based inclusive line ranges. `slice.json` names a small part (one
month's files and the questions answered inside them) for the CI test.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from pathlib import Path

from facts import DOCS, FACTS, FILLER, LINKS, NOTES

HERE = Path(__file__).resolve().parent
START = dt.date(2026, 6, 1)
DAYS = 121  # to 2026-09-29
TODAY = "2026-09-30"
SLICE_MONTH = "2026-07"
SLICE_QUESTIONS = 40


def main() -> None:
    rng = random.Random(21)
    topics = sorted(FILLER)
    by_topic: dict[str, list[tuple]] = {t: [f for f in FACTS if f[1] == t] for t in topics}
    # Each topic's facts land in order on distinct days spread over the four months.
    fact_day: dict[str, int] = {}
    for topic, facts in by_topic.items():
        days = sorted(rng.sample(range(DAYS), len(facts)))
        for fact, day in zip(facts, days):
            fact_day[fact[0]] = day
    # (day, topic) sessions: every fact's, plus small talk on up to three more topics a day.
    sessions: dict[int, list[str]] = {}
    for fact_id, day in fact_day.items():
        topic = next(f[1] for f in FACTS if f[0] == fact_id)
        sessions.setdefault(day, [])
        if topic not in sessions[day]:
            sessions[day].append(topic)
    for day in range(DAYS):
        for extra in rng.sample(topics, rng.choice([0, 1, 1, 2, 2, 3])):
            if extra not in sessions.setdefault(day, []):
                sessions[day].append(extra)

    out = HERE / "files"
    shutil.rmtree(out, ignore_errors=True)
    (out / "memory" / "docs").mkdir(parents=True)
    evidence: dict[str, dict] = {}  # fact or note id -> {"path", "start", "end"}
    for day in sorted(sessions):
        date = (START + dt.timedelta(days=day)).isoformat()
        path = f"memory/{date}.md"
        lines = [f"# {date}", ""]
        minute = rng.randint(7 * 60, 9 * 60)
        for topic in sessions[day]:
            session = f"{rng.getrandbits(32):08x}"
            facts = [f for f in by_topic[topic] if fact_day.get(f[0]) == day]
            small = rng.sample(FILLER[topic], rng.randint(4, 8))
            turns: list[tuple[str | None, str, str]] = [(None, a, b) for a, b in small]
            for fact in facts:
                turns.insert(rng.randint(0, len(turns)), (fact[0], fact[2], fact[3]))
            for fact_id, asked, answered in turns:
                minute += rng.randint(1, 9)
                stamp = f"{minute // 60 % 24:02d}:{minute % 60:02d}"
                lines.append(f"- {stamp} session {session}: asked “{asked}” → answered “{answered}”")
                if fact_id:
                    evidence[fact_id] = {"path": path, "start": len(lines), "end": len(lines)}
            minute += rng.randint(30, 240)
        write(out / path, lines)

    memory = ["# Memory", ""]
    for note_id, line, _, _ in NOTES:
        memory.append(f"- {line}")
        evidence[note_id] = {"path": "MEMORY.md", "start": len(memory), "end": len(memory)}
    write(out / "MEMORY.md", memory)

    questions: list[dict] = []
    for fact_id, _, _, _, kw, para, when in FACTS:
        ev = [evidence[fact_id]]
        questions += [
            {"id": f"{fact_id}-kw", "kind": "keyword", "question": kw, "evidence": ev},
            {"id": f"{fact_id}-para", "kind": "paraphrase", "question": para, "evidence": ev},
            {"id": f"{fact_id}-when", "kind": "temporal", "question": when, "evidence": ev},
        ]
    for link_id, first, second, question in LINKS:
        questions.append({"id": link_id, "kind": "multi-hop", "question": question,
                          "evidence": [evidence[first], evidence[second]]})
    for note_id, _, kw, para in NOTES:
        ev = [evidence[note_id]]
        questions += [
            {"id": f"{note_id}-kw", "kind": "keyword", "question": kw, "evidence": ev},
            {"id": f"{note_id}-para", "kind": "paraphrase", "question": para, "evidence": ev},
        ]
    for path, title, sections, asked in DOCS:
        lines = [f"# {title}", ""]
        where: dict[tuple[str, int], int] = {}
        for heading, items in sections:
            lines += [f"## {heading}", ""]
            for i, item in enumerate(items):
                lines.append(f"- {item}")
                where[(heading, i)] = len(lines)
            lines.append("")
        write(out / path, lines[:-1])
        for qid, kind, question, heading, i in asked:
            line = where[(heading, i)]
            questions.append({"id": qid, "kind": kind, "question": question,
                              "evidence": [{"path": path, "start": line, "end": line}]})

    with open(HERE / "questions.jsonl", "w") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")

    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.md"))
    in_slice = [p for p in files if p.startswith(f"memory/{SLICE_MONTH}") or p == "MEMORY.md"
                or p == "memory/docs/heron-runbook.md"]
    answered = [q for q in questions if all(e["path"] in in_slice for e in q["evidence"])]
    picked = sorted(rng.sample(answered, min(SLICE_QUESTIONS, len(answered))), key=questions.index)
    manifest = {"today": TODAY, "agent": "maya"}
    (HERE / "dataset.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (HERE / "slice.json").write_text(json.dumps(
        {"files": in_slice, "questions": [q["id"] for q in picked]}, indent=2) + "\n")
    print(f"{len(files)} files, {sum(len((out / p).read_text().splitlines()) for p in files)} lines, "
          f"{len(questions)} questions; slice: {len(in_slice)} files, {len(picked)} questions")


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
