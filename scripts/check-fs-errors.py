#!/usr/bin/env python3
"""Fails when C++ code calls a std::filesystem function through its throwing overload.

trace returns Status, never throws across a module border: a std::filesystem call without
its std::error_code argument throws filesystem_error on the first unreadable folder, and
an uncaught exception aborts the command (exit 134). Every call must pass an error code,
and a directory iteration must advance with increment(ec) (range-for's ++ throws).

Usage: check-fs-errors.py [ROOT]   scan ROOT (default: the repository) and list violations
       check-fs-errors.py --self-test
Scans every top-level folder of ROOT (*.cc, *.h, *.cu, *.cuh, *.cpp, *.hpp), so a new part
(exporters/, redact/, ...) is covered without being listed here, except: tests/ and testkit/ (the
fixtures tests and benchmarks share; may throw: gtest reports an exception as a failure, a
benchmark stops), build trees (a folder with a CMakeCache.txt),
hidden folders and node_modules; in a git checkout, only files git does not ignore (so
bench/llama_cpp/compare.sh's llama.cpp sources under build-llama/ are not scanned).
"""
import os
import re
import subprocess
import sys

SKIP_DIRS = {"tests", "testkit", "node_modules"}
EXTS = (".cc", ".h", ".cu", ".cuh", ".cpp", ".hpp")

# Free functions (and iterator constructors) of <filesystem> that have an error_code
# overload besides the throwing one.
FUNCS = """absolute canonical weakly_canonical relative proximate copy copy_file copy_symlink
create_directory create_directories create_hard_link create_symlink create_directory_symlink
current_path equivalent exists file_size hard_link_count is_block_file is_character_file
is_directory is_empty is_fifo is_other is_regular_file is_socket is_symlink last_write_time
permissions read_symlink remove remove_all rename resize_file space status symlink_status
temp_directory_path directory_iterator recursive_directory_iterator""".split()

CALL = re.compile(r"\b(?:std::filesystem|std::experimental::filesystem|fs)::(" +
                  "|".join(FUNCS) + r")\s*\(")
RANGE_FOR = re.compile(r"\bfor\s*\([^;{}]*?:\s*(?:std::filesystem|fs)::(?:recursive_)?directory_iterator\b")
EC_DECL = re.compile(r"\b(?:std::)?error_code\s+(\w+)")
EC_PARAM = re.compile(r"\b(?:std::)?error_code\s*&\s*(\w+)")
# exists(st), is_directory(st), ... of a file_status do not touch the file system.
STATUS_DECL = re.compile(r"\bfile_status\s+(\w+)")


def strip(text):
    """Blanks comments and string/char literals, keeping offsets and newlines."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if text[k] != "\n":
                    out[k] = " "
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            for k in range(i, end):
                if text[k] != "\n":
                    out[k] = " "
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def last_argument(text, open_paren):
    """The last top-level argument of the call whose '(' is at open_paren."""
    depth, start, i = 0, open_paren + 1, open_paren
    args = []
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                return args[-1].strip()
        elif c == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
        i += 1
    return ""


def check_text(text, name="<text>"):
    code = strip(text)
    error_codes = set(EC_DECL.findall(code)) | set(EC_PARAM.findall(code))
    statuses = set(STATUS_DECL.findall(code))
    problems = []
    for m in CALL.finditer(code):
        arg = last_argument(code, m.end() - 1)
        if arg not in error_codes and arg not in statuses:
            line = code.count("\n", 0, m.start()) + 1
            problems.append(f"{name}:{line}: {m.group(0)[:-1].strip()}(...) without a "
                            "std::error_code argument: it throws (pass one and check it)")
    for m in RANGE_FOR.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        problems.append(f"{name}:{line}: range-for over a directory_iterator: its ++ throws; "
                        "advance with it.increment(ec)")
    return problems


def self_test():
    bad = [
        "bool a = std::filesystem::exists(p);",
        "namespace fs = std::filesystem; fs::create_directories(dir);",
        "auto n = std::filesystem::file_size(path, other);",
        "std::error_code ec; for (const auto& e : fs::directory_iterator(dir, ec)) {}",
        "auto t = fs::temp_directory_path();",
    ]
    good = [
        "std::error_code ec; bool a = std::filesystem::exists(p, ec);",
        "void F(std::error_code& err) { fs::remove_all(fs::path(x) / \"y\", err); }",
        "// fs::exists(p) in a comment\nconst char* s = \"fs::exists(p)\";",
        "std::error_code ec; fs::copy_file(a, b, fs::copy_options::overwrite_existing, ec);",
        "std::error_code ec; fs::directory_iterator it(dir, ec);",
        "std::error_code ec; fs::file_status st = fs::status(p, ec); bool d = fs::is_directory(st);",
    ]
    failures = 0
    for text in bad:
        if not check_text(text):
            print(f"self-test: not flagged: {text}")
            failures += 1
    for text in good:
        if check_text(text):
            print(f"self-test: wrongly flagged: {text}: {check_text(text)}")
            failures += 1
    print("self-test: " + ("ok" if failures == 0 else f"{failures} failures"))
    return 1 if failures else 0


def source_dirs(root):
    """The top-level folders holding the project's code: all but tests/, build trees,
    hidden folders and node_modules."""
    dirs = []
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if (not os.path.isdir(path) or d in SKIP_DIRS or d.startswith(".") or
                os.path.exists(os.path.join(path, "CMakeCache.txt"))):
            continue
        dirs.append(d)
    return dirs


def git_files(root):
    """The files of a git checkout that git does not ignore (tracked, or new and not yet
    added), or None outside git: what is ignored (build-llama/'s llama.cpp sources, other
    build trees) is not the project's code."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted(f for f in out.decode("utf-8", "replace").split("\0") if f)


def source_files(root):
    """The project's source files: not tests/, build trees, hidden folders or node_modules."""
    listed = git_files(root)
    if listed is not None:
        top = set(source_dirs(root))
        for rel in listed:
            parts = rel.split("/")
            if (len(parts) > 1 and parts[0] in top and rel.endswith(EXTS) and
                    not any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]) and
                    os.path.isfile(os.path.join(root, rel))):
                yield os.path.join(root, rel)
        return
    for d in source_dirs(root):
        for dirpath, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs[:] = sorted(s for s in subdirs if s not in SKIP_DIRS and not s.startswith("."))
            for f in sorted(files):
                if f.endswith(EXTS):
                    yield os.path.join(dirpath, f)


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = []
    for path in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as fh:
            problems += check_text(fh.read(), os.path.relpath(path, root))
    for p in problems:
        print(p)
    if problems:
        print(f"check-fs-errors: {len(problems)} throwing std::filesystem call(s)")
        return 1
    print("check-fs-errors: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
