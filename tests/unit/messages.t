#!/bin/sh
# messages.t - every message the SPANK plugin itself prints (spank/*.c, and lib/core site,
# request, settings, decision, cache and the hold channel, which only the plugin uses) is
# explained in the user guide's Troubleshooting section (doc/user-guide.md): its fixed words (a run of four or more,
# without format directives) appear there (TAP).
. "$(dirname "$0")/tap.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
python3 - "$src" <<'PY'
import re, sys, glob
src = sys.argv[1]
readme = open(f"{src}/doc/user-guide.md").read()
section = readme[readme.index("## Troubleshooting"):]
end = section.find("\n## ", 5)
section = section[:end] if end > 0 else section
section = re.sub(r"\s+", " ", re.sub(r"[`*\\]", "", section))
n = failed = 0
for path in sorted(glob.glob(f"{src}/spank/*.c")) + [f"{src}/lib/core/{f}.c" for f in ("settings", "site", "request", "decision", "cache", "file_replace", "hold", "hold_server", "hold_client")]:
    text = open(path).read()
    for m in re.finditer(r"\b(?:ab_fail|slurm_error|slurm_info|slurm_spank_log)\s*\(", text):
        i, depth = m.end(), 1
        j = i
        while depth and j < len(text):
            c = text[j]
            if c == '"':
                j += 1
                while text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
            depth += (c == "(") - (c == ")")
            j += 1
        message = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', text[i:j - 1])).replace('\\"', '"')
        # the fixed words: the longest run between format directives
        runs = [r.strip(" :;,()'") for r in re.split(r"%[-.0-9*]*[a-z]+", message)]
        run = max(runs, key=lambda r: len(r.split())) if runs else ""
        if len(run.split()) < 4:
            continue
        n += 1
        ok = run in section
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {n} - {path[len(src) + 1:]}: \"{run}\"")
print(f"1..{n}")
sys.exit(1 if failed else 0)
PY
