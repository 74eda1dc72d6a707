"""Merge the reports of a version matrix into one table: system x version -> verdict and ratio.

Each matrix entry (a nox session here, a job in .github/workflows/equivalence.yml)
leaves a folder with ``session.json`` (what was asked for, what was installed,
how far it got) and, when the suite ran, the ``equivalence.json`` written by
``--equivalence-report``. An entry that failed to install or import is a row of
the sessions table saying so; its column in the matrix reads "not run".

Those folders are not committed. With ``--entries docs/matrix``, each one is first
written there as ``<session>.json`` (the session record and the part of the report
the table shows, replacing the earlier run of that session), and the table is made
of every entry in that folder: rerunning one entry updates its column and keeps the
others.

    python -m docgen.matrix merge matrix-reports/ --entries docs/matrix --committed docs/equivalence.json \
        --output docs/MATRIX.md
    python -m docgen.matrix record matrix-reports/tf-2.20 --session tf-2.20 \
        --requested '{"tensorflow": "2.20.*"}' --status "tests ran" --installed tensorflow,tf_keras
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
from pathlib import Path

SESSION_FILE = "session.json"

# What each kind of matrix entry runs: the systems whose names start with one of the prefixes (what the
# entry's pins change), less those starting with an exclusion. noxfile.py's sessions select with it, and
# tests/harness/test_matrix.py holds docs/MATRIX.md to it (every selected system of this commit has a row).
SELECTIONS = {
    "tensorflow": (("numpy", "tf-concat", "tf1", "tf-keras", "keras-tf"), ()),
    "keras": (("numpy", "torch", "keras"), ("torch-onnx",)),
    "jax": (("numpy", "flax", "equinox", "keras-jax"), ()),
    "onnxruntime": (("numpy", "onnx-ort", "torch-onnx"), ()),
    "openvino": (("numpy", "onnx-openvino"), ()),
    "torch": (("numpy", "torch"), ()),
}


def starting_with(names, prefixes: tuple[str, ...], exclude: tuple[str, ...] = ()) -> list[str]:
    """The names that start with one of ``prefixes`` and with none of ``exclude``, in their order."""
    return [n for n in names if n.startswith(prefixes) and not n.startswith(exclude)]


def selected(kind: str, names) -> list[str]:
    """The systems among ``names`` an entry of ``kind`` runs (``SELECTIONS``)."""
    return starting_with(names, *SELECTIONS[kind])


REPORT_FILE = "equivalence.json"
# How far an entry got; only "tests ran" has a report.
STATUSES = ("install failed", "import failed", "tests ran")


def write_session(directory, *, session: str, requested: dict, status: str, message: str = "",
                  installed: dict | None = None, pytest_exit: int | None = None,
                  seconds: float | None = None) -> None:
    """The record a matrix entry leaves beside its report (or instead of it)."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SESSION_FILE).write_text(json.dumps({
        "session": session, "requested": requested, "status": status, "message": message,
        "installed": installed or {}, "pytest_exit": pytest_exit, "seconds": seconds}, indent=2) + "\n")


def _natural(name: str):
    """jax-0.9.2 before jax-0.10.2: numbers compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


COMMITTED = "committed"  # the entry of the committed report (``committed_entry``)


def committed_entry(path) -> dict:
    """The committed report (docs/equivalence.json) as the matrix's first entry: the suite at full depth on
    the versions of the project's own environment, every system of it. An entry whose pins are those
    versions would repeat it."""
    report = json.loads(Path(path).read_text())
    return {"session": COMMITTED, "requested": {"the project's extras": "pyproject.toml"}, "status": "tests ran",
            "message": f"{Path(path).name}, {report['date'][:10]}", "installed": report["environment"]["versions"],
            "pytest_exit": None, "seconds": None, "report": report}


# A committed entry (docs/matrix/<session>.json): the session record and, of its report, what markdown() reads.
# Small on purpose: a diff of the folder reads as "what changed in the table". Its JSON Schema is
# docs/matrix-entry.schema.json; raise ENTRY_SCHEMA (and the schema's const) when it changes.
ENTRY_SCHEMA = 1
ENTRY_SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "matrix-entry.schema.json"
SESSION_KEYS = ("session", "requested", "status", "message", "installed", "pytest_exit", "seconds")
ENTRY_KEYS = ("schema_version", *SESSION_KEYS, "source", "report")
ENVIRONMENT_KEYS = ("python", "os", "cpu", "cores")  # the table's machine line
ROW_KEYS = ("system", "dtype", "verdict", "worst_ratio", "cases", "known_issues", "failed_tests")
FAILED_KEYS = ("test", "message")


def entry_record(entry: dict) -> dict:
    """``entry`` as committed (docs/matrix-entry.schema.json): its report cut to what the table shows."""
    report = entry["report"]
    if report is not None:
        environment = report.get("environment")
        report = {"date": report.get("date"), "depth": report.get("depth"), "outcomes": report["outcomes"],
                  "environment": environment and {k: environment[k] for k in ENVIRONMENT_KEYS},
                  "systems": [{**{k: row[k] for k in ROW_KEYS},
                               "failed_tests": [{k: f[k] for k in FAILED_KEYS} for f in row["failed_tests"]]}
                              for row in report["systems"]]}
    kept = {k: entry[k] for k in ENTRY_KEYS if k in entry}
    return {"schema_version": ENTRY_SCHEMA, **kept, "report": report}


def write_entry(entry: dict, directory) -> Path:
    if not re.fullmatch(r"[\w.+-]+", entry["session"]):  # the session names the file
        raise SystemExit(f"session {entry['session']!r} cannot name a file in {directory}")
    path = Path(directory) / f"{entry['session']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_entry_json(entry_record(entry)))
    return path


def _entry_json(record: dict) -> str:
    """``record`` indented, each report row on one line: a rerun's diff is then a line per changed cell."""
    rows = record["report"]["systems"] if record["report"] else []
    text = json.dumps({**record, "report": record["report"] and {**record["report"], "systems": []}},
                      indent=2, ensure_ascii=False)
    if not rows:
        return text + "\n"
    end = '"systems": []\n  }\n}'  # the report is the record's last key, its rows the report's
    assert text.endswith(end), "entry_record keeps report last, and systems last in it"
    lines = ",\n".join(f"      {json.dumps(row, ensure_ascii=False)}" for row in rows)
    return text[:-len(end)] + f'"systems": [\n{lines}\n    ]\n  }}\n}}\n'


def _entry_errors(entry) -> list[str]:
    """What in ``entry`` does not fit docs/matrix-entry.schema.json (jsonschema's words, each with where), and
    a row whose values make no cell (a null ratio where the cell shows one)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(ENTRY_SCHEMA_FILE.read_text()))
    errors = [f"{error.json_path}: {error.message}" for error in sorted(validator.iter_errors(entry), key=str)]
    if errors:
        return errors
    for i, row in enumerate((entry["report"] or {}).get("systems", [])):
        try:
            cell_text(row)
        except (TypeError, ValueError) as error:
            errors.append(f"$.report.systems[{i}] makes no cell: {error}")
    return errors


def read_entry(path) -> dict:
    """A committed entry, checked: a file that is not one is an error naming it, never a traceback in markdown()."""
    path = Path(path)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8
        raise SystemExit(f"{path}: not a matrix entry: {error}") from None
    version = entry.get("schema_version") if isinstance(entry, dict) else None
    if version != ENTRY_SCHEMA:
        raise SystemExit(f"{path}: a matrix entry of schema_version {version!r}, docgen.matrix reads {ENTRY_SCHEMA}: "
                         "rerun its session, then `nox -s matrix`")
    errors = _entry_errors(entry)
    if not errors and entry["session"] != path.stem:
        errors.append(f"session {entry['session']!r} is not the file's name")
    if errors:
        raise SystemExit(f"{path}: not a matrix entry: " + "; ".join(errors))
    del entry["schema_version"]
    return entry


def _read_json(path: Path, what: str) -> dict:
    """A JSON object from ``path``; anything else an error naming the file, never a traceback."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8
        raise SystemExit(f"{path}: not {what}: {error}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"{path}: not {what}: a JSON {type(value).__name__}, not an object")
    return value


def fresh_entries(root) -> list[dict]:
    """The entries the matrix sessions left under ``root``, one folder each (none where ``root`` does not exist)."""
    entries = []
    for session_file in Path(root).glob(f"*/{SESSION_FILE}"):
        entry = _read_json(session_file, "a matrix session's record")
        report = session_file.with_name(REPORT_FILE)
        entry["report"] = _read_json(report, "a matrix session's report") if report.exists() else None
        if entry["status"] == "tests ran" and entry["report"] is None:
            entry["message"] = f"no {REPORT_FILE}: pytest exited {entry['pytest_exit']}"
        entries.append(entry)
    return entries


def load_entries(root, committed=None, entries=None) -> list[dict]:
    """The table's entries: the committed report's where ``committed`` names it, then by session name those
    under ``root`` (None: none). Where ``entries`` names the folder of committed entries, each one under
    ``root`` is first written there, replacing the earlier run of its session, and the table is made of that
    folder: what is committed is exactly what the table shows."""
    fresh = fresh_entries(root) if root else []
    if entries:
        for entry in fresh:
            write_entry(entry, entries)
        found = [read_entry(path) for path in Path(entries).glob("*.json")]
    else:
        found = fresh
    if not found:
        raise SystemExit(f"no {SESSION_FILE} under {root}" + (f" nor entry in {entries}" if entries else "")
                         + ": run the matrix sessions first")
    found.sort(key=lambda entry: _natural(entry["session"]))
    return ([committed_entry(committed)] if committed else []) + found


def cell_text(system: dict) -> str:
    """A matrix cell from a report row's verdict (the verdicts of rnn_equivalence.harness.summary.Row)."""
    verdict, ratio = system["verdict"], system["worst_ratio"]
    if system["cases"] == 0 and system["known_issues"]:
        return "known issue"
    if verdict.startswith("FAILED"):
        return f"✗ {verdict}"
    mark = "✓" if verdict == "equivalent" else "✓*" if verdict.startswith("NOT equivalent where") else "✗"
    return f"{mark} {ratio:.3f}" if ratio < 1000 else f"{mark} {ratio:.2g}"


def _outcomes(report) -> str:
    return ", ".join(f"{n} {k}" for k, n in report["outcomes"].items() if n) if report else ""


def markdown(entries: list[dict], title_date: str | None = None) -> str:
    date = title_date or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    ran = [e for e in entries if e["report"]]
    env = ran[0]["report"]["environment"] if ran else {}
    lines = ["# Version matrix", "",
             f"Merged {date} from {len(entries)} matrix entries"
             + (f"; machine: {env['cpu']} ({env['cores']} cores), {env['os']}, Python {env['python']}."
                if env else "."),
             "", "Regenerate: `nox` (every session at full depth, then `matrix`; `nox -- --depth=default` at the "
             "default depth), or one entry: `nox -s \"tensorflow(tf='2.20')\"` then `nox -s matrix`.", "",
             "## Entries", "",
             "Depth: the combinations of factors each system ran (README, \"Depth\"); time: the entry's pytest run "
             "on this machine, installs not counted.", "",
             "| entry | asked for | installed | status | depth | time | tests |", "|---|---|---|---|---|---|---|"]
    for e in entries:
        asked = ", ".join(f"{k} {v}" for k, v in e["requested"].items())
        installed = ", ".join(f"{k} {v}" for k, v in e["installed"].items())
        status = e["status"] + (f": {e['message']}" if e["message"] else "")
        depth = (e["report"] or {}).get("depth", "")
        seconds = e.get("seconds")
        took = f"{seconds / 60:.1f} min" if seconds is not None else ""
        lines.append(f"| {e['session']} | {asked} | {installed} | {status.replace('|', '/')} | {depth} | {took} "
                     f"| {_outcomes(e['report'])} |")

    systems = sorted({(s["system"], s["dtype"]) for e in ran for s in e["report"]["systems"]})
    lines += ["", "## System x entry", "",
              "Each cell: ✓ equivalent, with the worst error as a fraction of the derived bound; ✓* equivalent "
              "except a known upstream issue in some cases (listed in that entry's report); ✗ not equivalent or "
              "failed; \"not run\" when the entry did not select that system or did not get to run.", "",
              "| system | dtype | " + " | ".join(e["session"] for e in entries) + " |",
              "|---|---|" + "---|" * len(entries)]
    disagreements = []
    for name, dtype in systems:
        cells = []
        for e in entries:
            found = [s for s in (e["report"] or {}).get("systems", []) if (s["system"], s["dtype"]) == (name, dtype)]
            cells.append(cell_text(found[0]) if found else "not run")
        lines.append(f"| {name} | {dtype} | " + " | ".join(cells) + " |")
        verdicts = {e["session"]: c.split(" ")[0] for e, c in zip(entries, cells) if c != "not run"}
        if len(set(verdicts.values())) > 1:
            disagreements.append(f"- {name} {dtype}: " + ", ".join(f"{v} in {k}" for k, v in verdicts.items()))
    if disagreements:
        lines += ["", "## Where versions disagree", "",
                  "Systems whose verdict changes from one entry to another (the failed tests below say how):", "",
                  *disagreements]
    failed = [(e["session"], s["system"], f) for e in ran for s in e["report"]["systems"] for f in s["failed_tests"]]
    if failed:
        lines += ["", "## Failed tests", ""]
        lines += [f"- {session}, {system}: `{f['test']}`: {f['message']}" for session, system, f in failed]
    return "\n".join(lines) + "\n"


def installed_versions(distributions) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for dist in distributions:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser("merge", help="merge every entry under ROOT into one Markdown table")
    merge.add_argument("root", help="folder holding one sub-folder per matrix entry")
    merge.add_argument("--output", required=True, help="the Markdown file to write")
    merge.add_argument("--committed", default=None, help="the committed report (equivalence.json): the first column")
    merge.add_argument("--entries", default=None,
                       help="the folder of committed entries (docs/matrix): ROOT's are written there, then all merged")
    record = commands.add_parser("record", help="write an entry's session.json")
    record.add_argument("directory")
    record.add_argument("--session", required=True)
    record.add_argument("--requested", required=True, type=json.loads, help="JSON object: distribution -> pin")
    record.add_argument("--status", required=True, choices=STATUSES)
    record.add_argument("--message", default="")
    record.add_argument("--installed", default="", help="comma-separated distributions whose versions to record")
    record.add_argument("--seconds", type=float, default=None, help="how long the entry's pytest run took")
    args = parser.parse_args(argv)
    if args.command == "record":
        write_session(args.directory, session=args.session, requested=args.requested, status=args.status,
                      message=args.message, installed=installed_versions(filter(None, args.installed.split(","))),
                      seconds=args.seconds)
        return 0
    Path(args.output).write_text(markdown(load_entries(args.root, args.committed, args.entries)))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
