"""A Dockerfile as stages of instructions, enough for the checks in check_manifests.py.

    stages = parse(Path("Dockerfile").read_text())
    final = stages[-1]; final.base, final.name, final.get("USER"), final.all("RUN"), final.exec_form("CMD")
"""
import json
import re
from dataclasses import dataclass, field


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list = field(default_factory=list)  # [(INSTRUCTION, argument text)]

    def all(self, instr):
        return [a for i, a in self.instructions if i == instr]

    def get(self, instr):
        """The last argument of `instr` in this stage (the one Docker applies), else None."""
        found = self.all(instr)
        return found[-1] if found else None

    def exec_form(self, instr):
        """ENTRYPOINT / CMD in JSON (exec) form as a list; None when absent or in shell form."""
        a = self.get(instr)
        if a is None:
            return None
        try:
            v = json.loads(a)
        except json.JSONDecodeError:
            return None
        return v if isinstance(v, list) else None


def parse(text):
    """Stages in order. Comments and blank lines go; `\\` continuations are joined."""
    lines, cur = [], ""
    for raw in text.splitlines():
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if cur and s.startswith("#"):
            continue  # a comment line inside a continuation
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        lines.append(cur + s)
        cur = ""
    if cur:
        lines.append(cur)
    stages = []
    for line in lines:
        instr, _, arg = line.partition(" ")
        instr, arg = instr.upper(), re.sub(r"\s+", " ", arg).strip()
        if instr == "FROM":
            m = re.match(r"(?:--platform=\S+ )?(\S+)(?: AS (\S+))?$", arg, re.IGNORECASE)
            if not m:
                raise ValueError(f"Dockerfile: cannot read FROM {arg!r}")
            stages.append(Stage(m.group(1), m.group(2)))
        elif not stages:
            if instr != "ARG":
                raise ValueError(f"Dockerfile: {instr} before the first FROM")
        else:
            stages[-1].instructions.append((instr, arg))
    return stages
