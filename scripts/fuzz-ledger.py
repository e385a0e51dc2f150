#!/usr/bin/env python3
"""Which fuzz runs count toward a target's goal: the code-under-test hash and the ledger.

The goal of 10 M executions per target (docs/fuzzing.md) is met across many runs, on
binaries built at different commits. A count carries over from one binary to the next only
when the code the target exercises is the same, and a commit touching an unrelated part of
the project must not reset it. This script decides that mechanically. The code under test
of TARGET is every project file that a compilation unit linked into its binary was compiled
from (the unit's source and every header it included), plus the build's compiler and flags:

  - the units come from the binary's DWARF (readelf --debug-dump=info: one compile unit per
    object the linker pulled in, so a library file the target never links is not counted);
  - each unit's included files come from the compiler's depfile in the build folder (*.o.d),
    so a change to any header a unit includes counts, down to a constant in it;
  - files outside the source tree and the build folder (the C++ library, system headers) are
    left out: the compiler's version stands for them;
  - the hash covers each file's path (relative to the source tree or the build folder) and
    content, each unit's compile flags with the two roots replaced by placeholders, and the
    build type, sanitizers and compilers from CMakeCache.txt, so it is the same on any
    machine and in any build folder. generated/base/build_info.h is hashed without its
    TRACE_GIT_REVISION line: that string names the commit, which would otherwise make every
    commit new code.

It is deliberately strict: a unity-built library is one unit, so a change anywhere in it
counts for every target that links it.

The ledger (tests/fuzz/ledger.tsv, committed) has one line per fuzzing run: when, the
target, its code hash, libFuzzer's executions, findings, the commit and a note. scripts/fuzz.sh
adds a line after each run. A target's count toward the goal is the sum of the executions of
the runs on its current code hash that found nothing.

Usage:
  fuzz-ledger.py hash [--build-dir DIR] [--files] TARGET...
      "TARGET HASH FILES" per target (STALE when the binary is older than its sources);
      --files lists the files hashed
  fuzz-ledger.py changed-since REV [--build-dir DIR] TARGET...
      which of the target's tracked source files differ between the commit REV and the
      working tree, to judge whether a run on REV's binary is on today's code (generated
      files are matched through their sources: proto/*.proto, base/build_info.h.in)
  fuzz-ledger.py add [--build-dir DIR] [--ledger FILE] TARGET EXECUTIONS FINDINGS [NOTE]
      append a run (a stale binary is recorded with the hash "stale": it counts for nothing)
  fuzz-ledger.py tally [--build-dir DIR] [--ledger FILE] [--goal N] [--json] [TARGET...]
      per target: its code hash now, the executions counted on it, what is left to the goal
  fuzz-ledger.py left [--build-dir DIR] [--ledger FILE] [--goal N] TARGET...
      "TARGET LEFT COUNTED HASH" per target: what scripts/fuzz.sh --to-goal runs (LEFT is 0
      once the goal is reached); a stale binary is an error, since its run would not count
  fuzz-ledger.py --self-test
      builds a small program with the C++ compiler and checks what changes its hash and what
      does not (a ctest, label unit)
The build folder must be one scripts/fuzz.sh made (CMake's Makefiles, which keep each
object's depfile beside it; Ninja folds them into its own log).
Exit status: 0; 1 with changed-since when some file differs; 2 on bad usage, or when a
binary, its DWARF or a depfile is missing (a one-line error naming it).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time

SOURCE_ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CACHE_KEYS = ("CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER", "TRACE_SANITIZE",
              "TRACE_LIBFUZZER", "TRACE_TEST_CXX_FLAGS", "CMAKE_CXX_FLAGS", "CMAKE_C_FLAGS")
REVISION_LINE = re.compile(rb"^#define TRACE_GIT_REVISION .*$", re.M)


class Error(Exception):
    pass


def compile_units(binary):
    """Absolute paths of the compilation units linked into `binary`."""
    try:
        out = subprocess.run(["readelf", "--debug-dump=info", "--dwarf-depth=1", binary],
                             check=True, capture_output=True, text=True, errors="replace").stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise Error(f"{binary}: readelf could not read its DWARF ({e})")
    units, name = [], None
    for line in out.splitlines():
        if "Compilation Unit @" in line:
            name = None
        elif "DW_AT_name" in line and name is None:
            name = line.split(": ")[-1].strip()
        elif "DW_AT_comp_dir" in line and name is not None:
            comp_dir = line.split(": ")[-1].strip()
            units.append(os.path.normpath(os.path.join(comp_dir, name)))
            name = "done"  # one name per unit: later ones belong to its children
    if not units:
        raise Error(f"{binary}: no compilation units in its DWARF (built without -g?)")
    return units


def parse_depfile(path):
    """(the object's source, [every file it depends on]) from a make-style depfile."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().replace("\\\n", " ")
    obj, _, deps = text.partition(": ")
    files, token = [], ""
    i = 0
    while i < len(deps):  # spaces in a name are written "\ "
        c = deps[i]
        if c == "\\" and i + 1 < len(deps) and deps[i + 1] == " ":
            token += " "
            i += 2
            continue
        if c.isspace():
            if token:
                files.append(token)
            token = ""
        else:
            token += c
        i += 1
    if token:
        files.append(token)
    # The source is the file the object is named after (X.cc.o from X.cc); clang may list
    # another first (ASan's ignore list).
    stem = os.path.basename(obj.strip())[:-len(".o")]
    source = next((f for f in files if os.path.basename(f) == stem), None)
    return source, files


def depfile_index(build_dir):
    """Each object's source (absolute) -> [(its depfile's folder, the files it depends on)]:
    a source compiled for several targets (the fuzz targets' shared seed file) has several."""
    index = {}
    if not os.path.isdir(build_dir):
        raise Error(f"{build_dir}: no such build folder")
    for root, dirs, names in os.walk(build_dir):
        dirs[:] = [d for d in dirs if d not in ("fuzz-corpus", "fuzz-findings", "fuzz-logs")]
        for n in names:
            if n.endswith(".o.d"):
                src, deps = parse_depfile(os.path.join(root, n))
                if src:
                    index.setdefault(os.path.normpath(os.path.join(build_dir, src)),
                                     []).append((root, deps))
    if not index:
        raise Error(f"{build_dir}: no depfiles (*.o.d) in it: build it with scripts/fuzz.sh "
                    "(CMake's Makefiles keep them; Ninja does not)")
    return index


def flags_file_of(depfile_dir):
    """The flags.make of the CMake target whose object folder holds `depfile_dir`."""
    d = depfile_dir
    while d and not d.endswith(".dir"):
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
    f = os.path.join(d, "flags.make")
    return f if os.path.isfile(f) else None


def relative(path, build_dir):
    """("src"|"build", path relative to that root), or None for a file outside both."""
    real = os.path.realpath(path)
    for tag, root in (("build", build_dir), ("src", SOURCE_ROOT)):
        if real == root or real.startswith(root + os.sep):
            return tag, os.path.relpath(real, root)
    return None


def code_under_test(build_dir, target):
    binary = os.path.join(build_dir, "tests", "fuzz", target)
    if not os.path.isfile(binary):
        raise Error(f"{binary}: no such fuzz binary (build it: scripts/fuzz.sh --build-only {target})")
    index = depfile_index(build_dir)
    files, flags = set(), set()
    for unit in compile_units(binary):
        if relative(unit, build_dir) is None:
            continue  # libFuzzer's and the sanitizers' runtime: the compiler stands for them
        if unit not in index:
            raise Error(f"{unit}: linked into {target} but no depfile in {build_dir} names it")
        # The object of this target's own folder when the source is compiled for several
        # (their flags differ); otherwise the one there is.
        candidates = sorted(index[unit])
        own = [c for c in candidates if f"{os.sep}{target}.dir" in c[0]]
        depfile_dir, deps = (own or candidates)[0]
        if not own and len(candidates) > 1:
            raise Error(f"{unit}: compiled for several targets, none of them {target}: "
                        "cannot tell which object is linked")
        for d in deps:
            p = os.path.normpath(d if os.path.isabs(d) else os.path.join(build_dir, d))
            r = relative(p, build_dir)
            if r is not None:
                files.add(r)
        fl = flags_file_of(depfile_dir)
        if fl is not None:
            flags.add(fl)
    return binary, sorted(files), sorted(flags)


def file_digest(build_dir, tag, rel):
    path = os.path.join(build_dir if tag == "build" else SOURCE_ROOT, rel)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Error(f"{path}: cannot read it ({e.strerror})")
    if tag == "build" and rel == os.path.join("generated", "base", "build_info.h"):
        data = REVISION_LINE.sub(b"", data)
    return hashlib.sha256(data).hexdigest()


def cache_entries(build_dir):
    out = []
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in CACHE_KEYS:
                    out.append(line.strip())
    except OSError:
        raise Error(f"{build_dir}: no CMakeCache.txt (not a build folder)")
    return sorted(out)


def compiler_version(build_dir):
    for entry in cache_entries(build_dir):
        if entry.startswith("CMAKE_CXX_COMPILER:"):
            cxx = entry.split("=", 1)[1]
            try:
                return subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                      check=True).stdout.splitlines()[0]
            except (OSError, subprocess.CalledProcessError, IndexError):
                return cxx
    return "?"


def code_hash(build_dir, target):
    binary, files, flags = code_under_test(build_dir, target)
    h = hashlib.sha256()
    h.update(f"compiler {compiler_version(build_dir)}\n".encode())
    for entry in cache_entries(build_dir):
        h.update(f"cache {entry}\n".encode())
    for fl in flags:
        with open(fl, "rb") as f:
            text = f.read().replace(build_dir.encode(), b"<build>").replace(
                SOURCE_ROOT.encode(), b"<src>")
        # Only the lines that reach the compiler (CMake's comments name the generator).
        text = b"\n".join(l for l in text.splitlines() if l and not l.startswith(b"#"))
        h.update(b"flags " + hashlib.sha256(text).hexdigest().encode() + b"\n")
    for tag, rel in files:
        h.update(f"{tag}/{rel} {file_digest(build_dir, tag, rel)}\n".encode())
    stale = [os.path.join(tag, rel) for tag, rel in files
             if os.path.getmtime(os.path.join(build_dir if tag == "build" else SOURCE_ROOT, rel))
             > os.path.getmtime(binary)]
    return h.hexdigest()[:16], files, stale


GENERATED_SOURCES = {  # a generated file (build folder) -> the tracked file it is made from
    re.compile(r"^proto/(.*)\.pb\.(cc|h)$"): r"proto/\1.proto",
    re.compile(r"^generated/base/build_info\.h$"): "base/build_info.h.in",
}


def tracked_sources(files):
    out = set()
    for tag, rel in files:
        if tag == "src":
            out.add(rel)
            continue
        for pattern, source in GENERATED_SOURCES.items():
            if pattern.match(rel):
                out.add(pattern.sub(source, rel))
                break
        else:
            # OTLP's .proto files come from npm (tools/js/node_modules), pinned by the lockfile.
            if rel.startswith("generated/otlp/"):
                out.add("tools/js/package-lock.json")
    return sorted(out)


LEDGER_COLUMNS = ("date", "target", "code_hash", "executions", "findings", "commit", "note")
DEFAULT_LEDGER = os.path.join(SOURCE_ROOT, "tests", "fuzz", "ledger.tsv")


def all_targets():
    folder = os.path.join(SOURCE_ROOT, "tests", "fuzz")
    return sorted(n[:-len(".cc")] for n in os.listdir(folder) if n.endswith("_fuzz.cc"))


def read_ledger(path):
    """The ledger's runs, as dicts; a malformed line is an error naming it."""
    runs = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return runs
    except OSError as e:
        raise Error(f"{path}: cannot read it ({e.strerror})")
    for number, line in enumerate(lines, 1):
        if not line or line.startswith("#") or line.startswith("date\t"):
            continue
        cells = line.split("\t")
        if len(cells) != len(LEDGER_COLUMNS) or not cells[3].isdigit() or not cells[4].isdigit():
            raise Error(f"{path}:{number}: not a ledger line ({len(LEDGER_COLUMNS)} tab-separated "
                        f"cells, executions and findings whole numbers)")
        runs.append(dict(zip(LEDGER_COLUMNS, cells)))
    return runs


def counted_executions(runs, target, digest):
    """What counts toward the goal: the executions of the runs on `digest` that found nothing."""
    return sum(int(r["executions"]) for r in runs
               if r["target"] == target and r["code_hash"] == digest and r["findings"] == "0")


def git_commit():
    r = subprocess.run(["git", "-C", SOURCE_ROOT, "rev-parse", "--short=12", "HEAD"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


def cmd_hash(args, build_dir):
    for t in args.targets:
        digest, files, stale = code_hash(build_dir, t)
        if args.files:
            for tag, rel in files:
                print(f"{tag}/{rel}")
            continue
        line = f"{t} {digest} {len(files)}"
        if stale:
            line += f" STALE (the binary is older than {stale[0]}: rebuild it)"
        print(line)
    return 0


def cmd_changed_since(args, build_dir):
    status = 0
    for t in args.targets:
        _, files, _ = code_hash(build_dir, t)
        sources = tracked_sources(files)
        diff = subprocess.run(["git", "-C", SOURCE_ROOT, "diff", "--name-only", args.rev, "--",
                               *sources], capture_output=True, text=True)
        if diff.returncode != 0:
            raise Error(f"git diff {args.rev}: {diff.stderr.strip()}")
        changed = diff.stdout.split()
        print(f"{t} {len(changed)} of {len(sources)} source files changed since {args.rev}" +
              ("" if not changed else ": " + " ".join(changed)))
        status = max(status, 1 if changed else 0)
    return status


def recorded_hash(now, started_as):
    """The hash a run is recorded under, and a remark for its note (or None).

    `now` is the binary's hash when the run ended ("stale" when older than a source),
    `started_as` the one fuzz.sh took before starting it (None: not given). A binary rebuilt
    during the run does not take the run with it: the run exercised the code it began with.
    """
    if started_as is None or started_as == now:
        return now, None
    if now == "stale":
        return started_as, "a source was edited during the run, the binary not rebuilt"
    return started_as, f"the binary was rebuilt during the run (code {now} at its end)"


def cmd_add(args, build_dir):
    if args.target not in all_targets():
        raise Error(f"no fuzz target '{args.target}' (tests/fuzz/{args.target}.cc)")
    for name, value in (("executions", args.executions), ("findings", args.findings)):
        if not value.isdigit():
            raise Error(f"{name} must be a whole number, got '{value}'")
    digest, _, stale = code_hash(build_dir, args.target)
    if stale:
        digest = "stale"
    digest, remark = recorded_hash(digest, args.started_as)
    if digest == "stale":
        print(f"fuzz-ledger.py: {args.target}: the binary was older than one of its sources, "
              "so its code is not today's: recorded with the hash 'stale' (it counts for nothing)",
              file=sys.stderr)
    if remark:
        print(f"fuzz-ledger.py: {args.target}: {remark}; recorded under {digest}, the code it "
              "began with", file=sys.stderr)
    note = " ".join(args.note + ([f"({remark})"] if remark else []))
    note = note.replace("\t", " ").replace("\n", " ")
    cells = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), args.target, digest,
             args.executions, args.findings, git_commit(), note]
    new = not os.path.exists(args.ledger)
    # One write per line, appended: two fuzz.sh runs adding at once do not interleave.
    with open(args.ledger, "a", encoding="utf-8") as f:
        f.write(("\t".join(LEDGER_COLUMNS) + "\n" if new else "") + "\t".join(cells) + "\n")
    print(f"{args.target} {digest} +{args.executions} ({args.ledger})")
    return 0


def goal_row(runs, goal, target, digest, stale):
    """One target's standing: the executions counted on `digest` and what is left of `goal`."""
    mine = [r for r in runs if r["target"] == target and r["code_hash"] == digest]
    counted = counted_executions(runs, target, digest)
    return {
        "target": target, "code_hash": digest, "stale": bool(stale),
        "executions": counted, "runs": len(mine),
        "runs_with_findings": sum(1 for r in mine if r["findings"] != "0"),
        "earlier_executions": sum(int(r["executions"]) for r in runs
                                  if r["target"] == target and r["code_hash"] != digest),
        "left": max(0, goal - counted), "reached": counted >= goal,
    }


def cmd_left(args, build_dir):
    """What scripts/fuzz.sh --to-goal runs: "TARGET LEFT" per target, each binary current."""
    if args.goal < 1:
        raise Error(f"--goal must be at least 1, got {args.goal}")
    runs = read_ledger(args.ledger)
    rows = []
    for t in args.targets:
        digest, _, stale = code_hash(build_dir, t)
        if stale:
            raise Error(f"{t}: the binary is older than {stale[0]}, so a run would count for "
                        "nothing: rebuild it (scripts/fuzz.sh without --no-build)")
        rows.append(goal_row(runs, args.goal, t, digest, stale))
    for r in rows:
        print(f"{r['target']} {r['left']} {r['executions']} {r['code_hash']}")
    return 0


def cmd_tally(args, build_dir):
    runs = read_ledger(args.ledger)
    rows = []
    for t in args.targets or all_targets():
        try:
            digest, _, stale = code_hash(build_dir, t)
        except Error as e:
            rows.append({"target": t, "code_hash": None, "error": str(e)})
            continue
        rows.append(goal_row(runs, args.goal, t, digest, stale))
    if args.json:
        print(json.dumps({"goal": args.goal, "ledger": args.ledger, "targets": rows}, indent=2))
        return 0
    print(f"{'target':<26} {'code hash':<16} {'executions':>12} {'left':>12}  "
          f"{'runs':>4}  earlier code")
    for r in rows:
        if r["code_hash"] is None:
            print(f"{r['target']:<26} {r['error']}")
            continue
        mark = "reached" if r["reached"] else f"{r['left']:,}"
        extra = " (binary STALE: rebuild, then tally)" if r["stale"] else ""
        if r["runs_with_findings"]:
            extra += f" ({r['runs_with_findings']} run(s) with findings)"
        print(f"{r['target']:<26} {r['code_hash']:<16} {r['executions']:>12,} {mark:>12}  "
              f"{r['runs']:>4}  {r['earlier_executions']:,}{extra}")
    reached = sum(1 for r in rows if r.get("reached"))
    print(f"{reached} of {len(rows)} targets at {args.goal:,} executions on their code as built")
    return 0


def self_test():
    """Builds a small program as fuzz.sh's build folder would hold it, then checks the hash."""
    import shutil
    import tempfile
    global SOURCE_ROOT
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        print("self-test: no C++ compiler on the PATH", file=sys.stderr)
        return 2
    saved_root, failures, checks = SOURCE_ROOT, [], []
    with tempfile.TemporaryDirectory() as tmp:
        src, build = os.path.join(tmp, "src"), os.path.join(tmp, "build")
        SOURCE_ROOT = os.path.realpath(src)
        files = {
            "lib/a.h": "#pragma once\nint A(int x);\n",
            "lib/a.cc": '#include "lib/a.h"\nint A(int x) { return x + 1; }\n',
            "lib/b.cc": ('#include "base/build_info.h"\n'
                         "const char* B() { return TRACE_VERSION; }\n"),
            "lib/unused.cc": "int Unused() { return 7; }\n",
            "tests/fuzz/t_fuzz.cc": ('#include "lib/a.h"\nconst char* B();\n'
                                     "int main() { return A(0) + (B() != nullptr); }\n"),
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            with open(os.path.join(src, rel), "w") as f:
                f.write(text)
        gen = os.path.join(build, "generated", "base")
        os.makedirs(gen)
        info = os.path.join(gen, "build_info.h")
        with open(info, "w") as f:
            f.write('#define TRACE_VERSION "0.1.0"\n#define TRACE_GIT_REVISION "aaaa"\n')
        with open(os.path.join(build, "CMakeCache.txt"), "w") as f:
            f.write(f"CMAKE_CXX_COMPILER:FILEPATH={cxx}\nCMAKE_BUILD_TYPE:STRING=RelWithDebInfo\n")
        obj_dir = os.path.join(build, "tests", "fuzz", "CMakeFiles", "t_fuzz.dir")
        os.makedirs(obj_dir)
        flags = os.path.join(obj_dir, "flags.make")
        with open(flags, "w") as f:
            f.write(f"# CMake generated\nCXX_FLAGS = -O1 -g -I{src} -I{build}/generated\n")
        binary = os.path.join(build, "tests", "fuzz", "t_fuzz")
        objects = []
        for rel in ("lib/a.cc", "lib/b.cc", "lib/unused.cc", "tests/fuzz/t_fuzz.cc"):
            obj = os.path.join(obj_dir, os.path.basename(rel) + ".o")
            subprocess.run([cxx, "-g", "-O1", "-I", src, "-I", os.path.join(build, "generated"),
                            "-MD", "-MF", obj + ".d", "-c", os.path.join(src, rel), "-o", obj],
                           check=True, cwd=build)
            if "unused" not in rel:
                objects.append(obj)
        subprocess.run([cxx, "-g", *objects, "-o", binary], check=True)

        def check(what, ok):
            checks.append(what)
            if not ok:
                failures.append(what)

        def digest():
            return code_hash(build, "t_fuzz")[0]

        def edit(path, text):
            with open(path, "w") as f:
                f.write(text)
            # The binary stays the newest file, as after a rebuild (the stale check is its own).
            os.utime(binary)

        h0, listed, stale = code_hash(build, "t_fuzz")
        names = {f"{tag}/{rel}" for tag, rel in listed}
        check("the linked units and their headers are listed",
              {"src/lib/a.h", "src/lib/a.cc", "src/lib/b.cc", "src/tests/fuzz/t_fuzz.cc",
               "build/generated/base/build_info.h"} <= names)
        check("a file compiled but not linked is not listed", "src/lib/unused.cc" not in names)
        check("no system header is listed", all(n.startswith(("src/", "build/")) for n in names))
        check("a fresh binary is not stale", not stale)
        check("the hash is the same when computed again", digest() == h0)
        edit(os.path.join(src, "lib", "unused.cc"), "int Unused() { return 8; }\n")
        check("a change to a file not linked leaves the hash", digest() == h0)
        edit(info, '#define TRACE_VERSION "0.1.0"\n#define TRACE_GIT_REVISION "bbbb"\n')
        check("a new revision in build_info.h leaves the hash", digest() == h0)
        edit(info, '#define TRACE_VERSION "0.2.0"\n#define TRACE_GIT_REVISION "bbbb"\n')
        check("any other change to build_info.h changes it", digest() != h0)
        edit(info, '#define TRACE_VERSION "0.1.0"\n#define TRACE_GIT_REVISION "cccc"\n')
        check("and undoing it gives the first hash back", digest() == h0)
        header = os.path.join(src, "lib", "a.h")
        edit(header, files["lib/a.h"] + "// a comment\n")
        check("a change to an included header changes it", digest() != h0)
        edit(header, files["lib/a.h"])
        edit(flags, f"# CMake generated\nCXX_FLAGS = -O2 -g -I{src} -I{build}/generated\n")
        check("a change of compile flags changes it", digest() != h0)
        edit(flags, f"# Another comment\nCXX_FLAGS = -O1 -g -I{src} -I{build}/generated\n")
        check("flags.make's comments do not count", digest() == h0)
        # Another target compiling the same source with other flags (as every fuzz target
        # compiles the shared seed file): this target's own object is the one hashed.
        decoy = os.path.join(build, "tests", "fuzz", "CMakeFiles", "a_fuzz.dir")
        os.makedirs(decoy)
        shutil.copy(os.path.join(obj_dir, "a.cc.o.d"), decoy)
        with open(os.path.join(decoy, "flags.make"), "w") as f:
            f.write("CXX_FLAGS = -O3\n")
        os.utime(binary)
        check("another target's object of the same source is not hashed", digest() == h0)
        os.utime(header, (os.path.getmtime(binary) + 10,) * 2)
        check("a header newer than the binary makes it stale", bool(code_hash(build, "t_fuzz")[2]))

        # The ledger: only runs on the current hash that found nothing count.
        ledger = os.path.join(tmp, "ledger.tsv")
        with open(ledger, "w") as f:
            f.write("\t".join(LEDGER_COLUMNS) + "\n")
            for code, execs, found in ((h0, 400, 0), (h0, 30, 0), ("0123456789abcdef", 5000, 0),
                                       (h0, 99, 1)):
                f.write(f"2026-01-01T00:00:00Z\tt_fuzz\t{code}\t{execs}\t{found}\tabc\tnote\n")
        os.utime(binary)
        counted = counted_executions(read_ledger(ledger), "t_fuzz", digest())
        check("the tally counts the clean runs on the current hash (430)", counted == 430)
        row = goal_row(read_ledger(ledger), 1000, "t_fuzz", digest(), False)
        check("what is left of a goal of 1,000 is 570", row["left"] == 570 and not row["reached"])
        row = goal_row(read_ledger(ledger), 430, "t_fuzz", digest(), False)
        check("a goal met exactly leaves 0 and is reached", row["left"] == 0 and row["reached"])
        with open(ledger, "a") as f:
            f.write("2026-01-01T00:00:00Z\tt_fuzz\tx\tmany\t0\tabc\tnote\n")
        try:
            read_ledger(ledger)
            check("a malformed ledger line is refused", False)
        except Error as e:
            check("a malformed ledger line is refused, naming its line", ":6:" in str(e))
        check("a run is recorded under the hash it ended with when no start is given",
              recorded_hash("aaaa", None) == ("aaaa", None))
        check("a run whose binary was rebuilt is recorded under the hash it began with",
              recorded_hash("bbbb", "aaaa")[0] == "aaaa" and recorded_hash("bbbb", "aaaa")[1])
        check("and one that began on a stale binary counts for nothing",
              recorded_hash("aaaa", "stale")[0] == "stale")
        check("a source edited during the run does not void it",
              recorded_hash("stale", "aaaa")[0] == "aaaa")
    SOURCE_ROOT = saved_root
    for f in failures:
        print(f"self-test FAILED: {f}")
    print(f"self-test: {'FAILED' if failures else 'ok'} "
          f"({len(failures)} of {len(checks)} checks failed)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(
        description="Fuzz runs that count: the code-under-test hash and the ledger "
                    "(see the top of this file).")
    ap.add_argument("--build-dir", default="build-fuzz",
                    help="the libFuzzer build folder (default: build-fuzz)")
    ap.add_argument("--ledger", default=DEFAULT_LEDGER,
                    help="the ledger file (default: tests/fuzz/ledger.tsv)")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hash", help="each target's code hash")
    p.add_argument("--files", action="store_true", help="list the files hashed")
    p.add_argument("targets", nargs="+", metavar="TARGET")
    p = sub.add_parser("changed-since", help="the target's files that differ from commit REV")
    p.add_argument("rev", metavar="REV")
    p.add_argument("targets", nargs="+", metavar="TARGET")
    p = sub.add_parser("add", help="append a run to the ledger")
    p.add_argument("target", metavar="TARGET")
    p.add_argument("executions", metavar="EXECUTIONS")
    p.add_argument("findings", metavar="FINDINGS")
    p.add_argument("--started-as", metavar="HASH",
                   help="the target's hash when the run began (`hash`; 'stale' if it was): "
                        "the run is recorded under it even if the binary was rebuilt since")
    p.add_argument("note", nargs="*", metavar="NOTE")
    p = sub.add_parser("tally", help="executions toward the goal on each target's code now")
    p.add_argument("--goal", type=int, default=10_000_000)
    p.add_argument("--json", action="store_true")
    p.add_argument("targets", nargs="*", metavar="TARGET")
    p = sub.add_parser("left", help="what is left of the goal per target: TARGET LEFT COUNTED HASH")
    p.add_argument("--goal", type=int, default=10_000_000)
    p.add_argument("targets", nargs="+", metavar="TARGET")
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    args = ap.parse_args()
    build_dir = os.path.realpath(args.build_dir)
    commands = {"hash": cmd_hash, "changed-since": cmd_changed_since, "add": cmd_add,
                "tally": cmd_tally, "left": cmd_left}
    try:
        return commands[args.command](args, build_dir)
    except Error as e:
        print(f"fuzz-ledger.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
