"""doc_test.py -- runs every fenced code block of README.md and docs/*.md, and checks their links.

So that the docs cannot rot, each fenced block is run the way a reader would use it:
  ```sh       run by bash (-e -o pipefail) in a scratch copy of the checkout, with weft-run,
              weft-bench, weft-sim and weft-info on PATH and .bazel/bin holding what Bazel built;
  ```c        compiled against include/weft.h, linked with libweft.so and run (a block without
              main() is wrapped in one, after #include <stdio.h>, <stdlib.h>, <string.h>, <weft.h>);
  ```python   run by the Python with torch and numpy (/usr/bin/python3, or $DOC_TEST_PYTHON), the
              weft package on PYTHONPATH and WEFT_LIBRARY set.
Words after the language in the fence's info string:
  ranks=N       run the block's program on N ranks under weft-run (c, python);
  timeout=S     seconds before the block counts as hung (default 60);
  needs=CMD,..  run only where these commands are on PATH (mpirun); else listed as skipped;
  no-run: why   do not run it (multi-host, GPU, Slurm, the whole suite): counted and listed.
A block whose fence must keep its form (README's first block, which CI's checker reads) may be
marked no-run by an HTML comment on the line above or below it: <!-- no-run: why -->.
```text blocks are output shown to the reader and are not compared, except ```text expect: each of
its lines must appear in the output of the block right above it. Any other language must say
no-run. Inside the test `bazel build LABEL...` is a stand-in that succeeds for the labels this
test has as data (Bazel built them before the test started) and fails naming any other.

Also checked: every relative link (and its #anchor, in Markdown files) points at something that
exists; docs/README.md, the index, links every page of docs/; every knob of common/config.c (with its default, where the doc's table gives one) and
every variable weft-info lists outside it is in docs/tuning.md; every weft_result_t code of include/weft.h is in docs/troubleshooting.md.

Usage: doc_test.py --bin DIR [--built LABEL]... [--list] [--only FILE]
  DIR: what Bazel built, laid out as bazel-bin (the test's runfiles, or .bazel/bin by hand).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

RUNNABLE = ("sh", "c", "python")
OUTPUT = ("text",)
TOOLS = {
    "weft-run": "tools/weft-run",
    "weft-bench": "tools/bench/weft-bench",
    "weft-sim": "tools/sim/weft-sim",
    "weft-info": "tools/info/weft-info",
}
C_PRELUDE = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <weft.h>\n"


class Block:
    def __init__(self, path, line, lang, info, text, marker):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.prev = None  # the fenced block before it in the same file
        self.ranks, self.timeout, self.no_run, self.expect, self.needs = 0, 60, None, False, []
        m = re.search(r"\bno-run\b:?\s*(.*)", info)
        if m:
            self.no_run = m.group(1).strip() or "(no reason given)"
            info = info[: m.start()]
        elif marker is not None:
            self.no_run = marker
        for word in info.split():
            key, _, value = word.partition("=")
            if key == "ranks" and value.isdigit():
                self.ranks = int(value)
            elif key == "timeout" and value.isdigit():
                self.timeout = int(value)
            elif key == "needs" and value:
                self.needs += value.split(",")
            elif word == "expect" and lang in OUTPUT:
                self.expect = True
            else:
                raise ValueError(f"{self.where()}: unknown word {word!r} in the fence's info")

    def where(self):
        return f"{self.path}:{self.line}"


def blocks_of(root, rel, errors):
    """The fenced blocks of one Markdown file, with the no-run marker of the line above each;
    what is wrong with the fences goes to errors."""
    lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        above = lines[i - 1].strip() if i > 0 else ""
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + fence + r"\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i == len(lines):
            errors.append(f"{rel}:{start}: fence not closed")
            break
        i += 1
        below = lines[i].strip() if i < len(lines) else ""
        marker = re.match(r"^<!--\s*no-run:\s*(.*?)\s*-->$", above) or \
            re.match(r"^<!--\s*no-run:\s*(.*?)\s*-->$", below)
        lang, _, rest = info.partition(" ")
        if not lang:
            errors.append(f"{rel}:{start}: a fenced block without a language (```sh, ```c, "
                          "```python, ```text, or another with no-run)")
            continue
        try:
            out.append(Block(rel, start, lang, rest, "\n".join(body) + "\n",
                             marker.group(1) if marker else None))
            out[-1].prev = out[-2] if len(out) > 1 else None
        except ValueError as e:
            errors.append(str(e))
    return out


def doc_files(root):
    files = ["README.md"]
    for d, _, names in os.walk(os.path.join(root, "docs")):
        files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    return sorted(files)


# --- links -------------------------------------------------------------------------------------

def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors_of(path):
    seen, out, fenced = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_links(root, rel):
    errors, fenced = [], False
    for no, line in enumerate(open(os.path.join(root, rel), encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        prose = re.sub(r"`[^`]*`", "", line)  # a link inside inline code is not a link
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto: not checked (no network in CI)
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(root, os.path.dirname(rel), path)) if path else \
                os.path.join(root, rel)
            if not os.path.exists(full):
                errors.append(f"{rel}:{no}: link to {target}: no such file")
            elif anchor and full.endswith(".md") and anchor not in anchors_of(full):
                errors.append(f"{rel}:{no}: link to {target}: no heading with that anchor")
    return errors


# --- what must be documented -------------------------------------------------------------------

def read(root, rel):
    path = os.path.join(root, rel)
    return open(path, encoding="utf-8").read() if os.path.exists(path) else ""


def check_named(root):
    errors = []
    tuning = read(root, "docs/tuning.md")
    table = re.findall(r'\{"(WEFT_[A-Z0-9_]+)", "([^"]*)"', read(root, "common/config.c"))
    knobs = [name for name, _ in table]
    for name, default in table:  # a default the doc gives must be the code's
        row = re.search(r"^\| `" + name + r"` \| ([^|]*) \|", tuning, re.M)
        if row and default and row.group(1).strip() != default:
            errors.append(f"docs/tuning.md: {name}'s default is {default} in common/config.c, "
                          f"{row.group(1).strip()} in the doc")
    if len(knobs) < 10:
        errors.append(f"common/config.c: found only {len(knobs)} knobs; has the table moved?")
    sections = open(os.path.join(root, "tools/info/sections.c")).read()
    m = re.search(r"other_vars\[\]\s*=\s*\{(.*?)\};", sections, re.S)
    others = re.findall(r'"(WEFT_[A-Z0-9_]+)"', m.group(1)) if m else []
    if not others:
        errors.append("tools/info/sections.c: other_vars not found; has it moved?")
    for name in knobs + others:
        if not re.search(r"`" + name + r"`", tuning):
            errors.append(f"docs/tuning.md: {name} (read by weft) is not documented")
    trouble = read(root, "docs/troubleshooting.md")
    enum = re.search(r"typedef enum \{(.*?)\} weft_result_t;",
                     open(os.path.join(root, "include/weft.h")).read(), re.S)
    codes = re.findall(r"\b(WEFT_(?:SUCCESS|ERR_[A-Z_]+))\b", enum.group(1)) if enum else []
    if not codes:
        errors.append("include/weft.h: weft_result_t not found")
    for code in codes:
        if code != "WEFT_SUCCESS" and not re.search(r"`" + code + r"`", trouble):
            errors.append(f"docs/troubleshooting.md: {code} has no entry")
    return errors


# --- running -----------------------------------------------------------------------------------

def make_world(root, bin_dir, built, tmp):
    """A scratch checkout (the source tree linked, .bazel/bin the built outputs) and tools/."""
    work = os.path.join(tmp, "checkout")
    os.makedirs(os.path.join(work, ".bazel"))
    for name in os.listdir(root):
        if name not in (".bazel", ".git") and not name.startswith((".venv", "bazel-")):
            os.symlink(os.path.join(root, name), os.path.join(work, name))
    os.symlink(bin_dir, os.path.join(work, ".bazel", "bin"))
    tools = os.path.join(tmp, "tools")
    os.makedirs(tools)
    for tool, rel in TOOLS.items():
        if os.path.exists(os.path.join(bin_dir, rel)):
            os.symlink(os.path.join(bin_dir, rel), os.path.join(tools, tool))
    python = os.environ.get("DOC_TEST_PYTHON", "/usr/bin/python3")
    for name in ("python", "python3"):
        os.symlink(python, os.path.join(tools, name))
    with open(os.path.join(tools, "bazel"), "w") as f:
        f.write("#!/bin/sh\n# The doc test's stand-in: these labels were built as its data.\n"
                'built=" %s "\n' % " ".join(built) +
                '[ "$1" = build ] || { echo "doc test: only bazel build runs here: $*" >&2; '
                "exit 1; }\nshift\nfor a; do case $a in -*) continue;; esac\n"
                '  case "$built" in *" $a "*) ;; *) echo "doc test: $a is not among the doc '
                'test\'s data (tests/docs/BUILD)" >&2; exit 1;; esac\ndone\n')
    os.chmod(os.path.join(tools, "bazel"), 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "TEST_", "RUNFILES"))}
    env.pop("LD_PRELOAD", None)
    env.update(PATH=tools + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
               PYTHONPATH=os.path.join(root, "python"),
               WEFT_LIBRARY=os.path.join(bin_dir, "libweft.so"), HOME=tmp,
               TMPDIR=tmp, PYTHONDONTWRITEBYTECODE="1")
    return work, tools, env, python


def command_for(block, work, tools, python, n):
    """The argv that runs one block, after writing what it needs into the scratch checkout."""
    base = os.path.join(work, f".doc_block_{n}")
    if block.lang == "sh":
        with open(base + ".sh", "w") as f:
            f.write(block.text)
        return ["bash", "-e", "-o", "pipefail", base + ".sh"]
    if block.lang == "python":
        with open(base + ".py", "w") as f:
            f.write(block.text)
        argv = [python, base + ".py"]
    else:
        src = block.text if re.search(r"\bmain\s*\(", block.text) else \
            C_PRELUDE + "int main(void) {\n" + block.text + "  return 0;\n}\n"
        with open(base + ".c", "w") as f:
            f.write(src)
        # libweft.so's SONAME is libweft.so.0, as installed: a folder with that name for it.
        lib_dir = os.path.join(os.path.dirname(tools), "lib")
        if not os.path.isdir(lib_dir):
            os.makedirs(lib_dir)
            os.symlink(os.path.join(work, ".bazel", "bin", "libweft.so"),
                       os.path.join(lib_dir, "libweft.so.0"))
        build = subprocess.run(
            ["cc", "-std=c11", "-Wall", "-Werror", "-D_GNU_SOURCE",
             "-I" + os.path.join(work, "include"), base + ".c", "-o", base, "-L" + lib_dir,
             "-l:libweft.so.0", "-Wl,-rpath," + lib_dir],
            capture_output=True, text=True)
        if build.returncode != 0:
            return "does not compile:\n" + build.stderr
        argv = [base]
    if block.ranks:
        argv = [os.path.join(tools, "weft-run"), "-n", str(block.ranks), "--"] + argv
    return argv


def run_block(block, work, tools, env, python, n):
    argv = command_for(block, work, tools, python, n)
    if isinstance(argv, str):
        return False, argv, 0.0
    start = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=block.timeout, text=True,
                           start_new_session=True)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return False, f"ran past {block.timeout} s\n{out}", time.monotonic() - start
    took = time.monotonic() - start
    if p.returncode != 0:
        return False, f"exit {p.returncode}\n{p.stdout}", took
    return True, p.stdout, took


def check_expected(block, last):
    """A ```text expect block: each of its lines must be in the output of the block before it."""
    if last is None or last[0] is not block.prev:
        return [f"{block.where()}: ```text expect does not follow a block that ran"]
    if not last[1]:
        return []  # the block's own failure is reported already
    missing = [l.strip() for l in block.text.splitlines() if l.strip() and l.strip() not in last[2]]
    return [f"{block.where()}: not in the output of {last[0].where()}: {l!r}" for l in missing]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=".", help="what Bazel built, laid out as bazel-bin")
    ap.add_argument("--built", action="append", default=[], help="a label --bin holds")
    ap.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    ap.add_argument("--only", help="run only the blocks of this file (README.md, docs/x.md)")
    ap.add_argument("-v", action="store_true", help="print every block's output")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    # The checkout: where README.md really lives (the runfiles hold links into it).
    readme = os.path.join(bin_dir, "README.md")
    root = os.path.dirname(os.path.realpath(readme if os.path.exists(readme) else "README.md"))

    errors = check_named(root)
    index = read(root, "docs/README.md")
    for rel in doc_files(root):  # the index lists every page
        if rel.startswith("docs/") and rel != "docs/README.md" and \
                f"]({os.path.relpath(rel, 'docs')})" not in index:
            errors.append(f"docs/README.md: {rel} is not in the index")
    blocks = []
    for rel in doc_files(root):
        errors += check_links(root, rel)
        blocks += blocks_of(root, rel, errors)
    for b in blocks:
        if b.no_run is None and b.lang not in RUNNABLE + OUTPUT:
            errors.append(f"{b.where()}: ```{b.lang} cannot be run here: mark it no-run with why")

    tmp = tempfile.mkdtemp(prefix="doc_test.", dir=os.environ.get("TEST_TMPDIR"))
    work, tools, env, python = make_world(root, bin_dir, args.built, tmp)
    ran, skipped, total, last = 0, [], time.monotonic(), None
    for n, b in enumerate(blocks):
        if args.only and b.path != args.only:
            continue
        if b.lang in OUTPUT:
            if b.expect and not args.list:
                errors += check_expected(b, last)
            continue
        if b.no_run is not None:
            skipped.append(b)
            continue
        missing = [cmd for cmd in b.needs if not shutil.which(cmd, path=env["PATH"])]
        if missing:
            skipped.append(b)
            b.no_run = "skipped here: " + ", ".join(missing) + " not on PATH"
            continue
        if args.list:
            print(f"run     {b.where()} ```{b.lang}")
            continue
        ok, out, took = run_block(b, work, tools, env, python, n)
        last = (b, ok, out)
        ran += 1
        print(f"{'ok' if ok else 'FAILED':7} {b.where()} ```{b.lang} {took:.1f} s", flush=True)
        if not ok:
            tail = "\n".join(out.splitlines()[-40:])
            errors.append(f"{b.where()}: ```{b.lang} block failed: {tail}")
        elif args.v:
            print(out)
    for b in skipped:
        print(f"no-run  {b.where()} ```{b.lang}: {b.no_run}")
    outputs = sum(b.lang in OUTPUT for b in blocks)
    print(f"\n{ran} blocks run, {len(skipped)} marked no-run, {outputs} output blocks, "
          f"in {time.monotonic() - total:.0f} s")
    shutil.rmtree(tmp, ignore_errors=True)
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
