"""The repository speaks only of itself.

Code, comments, test names, scripts and docs describe what the software
does. They do not refer to the project's development history (numbered
issues, work stops, reviews and their bug numbers, acceptance points) or
to design documents that are not in the repository. This test reads every
tracked text file and lists each line that does, with the rule it breaks.
History belongs in commit messages.
"""
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
THIS = os.path.relpath(os.path.abspath(__file__), ROOT)

# (rule, pattern); each pattern is case-insensitive.
RULES = [
    ("a numbered issue", r"\bissues?[\s-]*#?\d+"),
    ("a work stop", r"\bstops?\s+\d+\b|\bstop \d+'s\b"),
    ("a review and its bug numbers", r"\breview(ed)?,?\s+bugs?\b|\bbug\s+\d+\b|\bcode review\b"),
    ("an acceptance point", r"\bacceptance\s+points?\b|[(,]\s*points?\s+\d+|(^|//|#)\s*points?\s+\d+\s*[,:]"),
    ("a document outside the repository", r"\b(design|style|research)\.md\b"),
]
COMPILED = [(rule, re.compile(pattern, re.IGNORECASE)) for rule, pattern in RULES]

TEXT_SUFFIXES = (".cc", ".h", ".proto", ".py", ".sh", ".md", ".txt", ".cmake", ".conf",
                 ".service", ".mount", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".json")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files"], check=True,
                             capture_output=True, text=True).stdout
        names = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        names = []
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            names += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files]
    for name in names:
        base = os.path.basename(name)
        if name == THIS or not (name.endswith(TEXT_SUFFIXES) or base == "CMakeLists.txt"
                                or "/" not in name and "." not in base):
            continue
        if name.startswith("tests/fuzz/corpus/"):
            continue
        yield name


def violations(lines):
    """(line number, rule, line) for each line that breaks a rule."""
    found = []
    for number, line in enumerate(lines, 1):
        for rule, pattern in COMPILED:
            if pattern.search(line):
                found.append((number, rule, line.strip()))
                break
    return found


def test_the_rules_catch_history_and_let_descriptions_pass():
    bad = ["// issue 5 measured each", "(issue 6, point 7)", "Issue 6 review, bug 1:",
           "on stop 23's machine", "# Tests of issue 6 point 8", "(design.md, \"Checkpoint",
           "see ../shared/style.md", "(issue 4, acceptance points 1,", "at stop 20",
           "follow the issue-4 contract", "// Point 4: malformed declares",
           "// Point 3, first half: a rank commits"]
    good = ["// The servers that failed reads are kept per Client.",
            "SIGTERM stops the ranks", "// a stop of the service", "floating point",
            "the checkpoint's 4 ranks", "README.md, \"Checkpoint transactions\"",
            "// point 4 of the stripe"]
    for line in bad:
        assert violations([line]), "not caught: " + line
    for line in good:
        assert not violations([line]), "wrongly caught: " + line


def test_no_tracked_file_refers_to_the_project_history():
    report = []
    for name in tracked_files():
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for number, rule, line in violations(lines):
            report.append("%s:%d: refers to %s: %s" % (name, number, rule, line))
    assert not report, ("say what the code does, not how it came to be (history goes in "
                        "commit messages):\n" + "\n".join(report))
