#!/usr/bin/env python3
"""translate.py IN OUT - rewrites CUDA's launch syntax, kernel<<<grid, block, shared,
stream>>>(args) (kernel may name its template arguments), into emu_launch(dim3(grid), dim3(block), "kernel", [&]() { kernel(args); })
so a C++ compiler can build a .cu file against the emulator (tests/gpu/emu). Nothing else
changes."""
import re
import sys


def split_top(text):
    parts, depth, cur = [], 0, ""
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    parts.append(cur.strip())
    return parts


def translate(src):
    out, pos = [], 0
    for m in re.finditer(r"([A-Za-z_][A-Za-z_0-9]*(?:<[^<>;]*>)?)\s*<<<", src):
        if m.start() < pos:
            continue
        end = src.index(">>>", m.end())
        config = split_top(src[m.end():end])
        i = end + 3
        while src[i].isspace():
            i += 1
        assert src[i] == "(", "a launch without arguments"
        depth, j = 0, i
        while True:
            depth += (src[j] == "(") - (src[j] == ")")
            j += 1
            if depth == 0:
                break
        out.append(src[pos:m.start()])
        out.append(f"emu_launch(dim3({config[0]}), dim3({config[1]}), \"{m.group(1)}\", [&]() {{ "
                   f"{m.group(1)}{src[i:j]}; }})")
        pos = j
    out.append(src[pos:])
    return "".join(out)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text = f.read()
    with open(sys.argv[2], "w") as f:
        f.write(f'#line 1 "{sys.argv[1]}"\n' + translate(text))
