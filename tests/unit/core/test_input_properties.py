"""Properties of inventories and flags, for any input hypothesis makes up.

- The command line never shows a traceback and exits 0, 1, 2 or 3, whatever the inventory holds.
- A ``--limit`` never selects more hosts than its names match: a pattern with parts that cannot be
  parsed (an empty part, a regular expression that does not compile) is refused, never widened.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuready.core.errors import BadInput

GROUPS = ["gpu_nodes", "kube_control_plane", "esxi_hosts"]
SUBGROUPS = ["rack_a", "rack_b"]
names = st.text(alphabet="abcdefgh0123456789-", min_size=1, max_size=8).filter(lambda s: s[0].isalpha())
settings_doc = {
    "gpuready": {"node_classes": {"v100": {"gpu_model": "Tesla V100", "gpu_count": 4}}, "driver": {"branch": "580"}}
}


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, object]:
    """A valid inventory: hosts spread over gpuready's groups and sub-groups of gpu_nodes."""
    hosts = draw(st.lists(names, min_size=1, max_size=12, unique=True))
    doc: dict[str, dict] = {}
    for host in hosts:
        group = draw(st.sampled_from(GROUPS + SUBGROUPS))
        variables = draw(st.sampled_from([None, {"ansible_connection": "local"}, {"rack": "r1"}]))
        if group in SUBGROUPS:
            children = doc.setdefault("gpu_nodes", {}).setdefault("children", {})
            children.setdefault(group, {"hosts": {}})["hosts"][host] = variables
        else:
            doc.setdefault(group, {}).setdefault("hosts", {})[host] = variables
    return doc


def members(doc: dict[str, dict]) -> dict[str, set[str]]:
    """Each group's hosts (sub-groups included), read from the document itself, not through Ansible."""
    out: dict[str, set[str]] = {}
    for group, body in doc.items():
        found = set(body.get("hosts") or {})
        for child, child_body in (body.get("children") or {}).items():
            out[child] = set(child_body.get("hosts") or {})
            found |= out[child]
        out[group] = found
    return out


JUNK = ["", " ", "~", "~[", "~(a", "[", "[0", "]", ":", "&", "!", "a[1:x]", "@hosts.txt"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inventories(),
    st.lists(st.one_of(names, st.sampled_from(GROUPS + SUBGROUPS), st.sampled_from(JUNK)), min_size=1, max_size=4),
)
def test_a_limit_never_selects_more_than_its_names_match(doc: dict[str, dict], tokens: list[str]) -> None:
    from gpuready.core import inventory

    with tempfile.TemporaryDirectory() as tmp:
        inv = _write(Path(tmp), doc)
        loaded = inventory.load(inv)
        pattern = ",".join(tokens)
        groups = members(doc)
        all_hosts = set().union(*groups.values())
        allowed = set()
        for token in tokens:
            allowed |= groups.get(token, set()) | ({token} & all_hosts)
        try:
            chosen = loaded.limit(pattern)
        except BadInput as e:
            assert "--limit" in str(e)
            return
        assert set(chosen) <= allowed, f"--limit {pattern!r} selected {sorted(set(chosen) - allowed)}"
        assert chosen


documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)
raw = st.one_of(
    documents.map(lambda d: yaml.safe_dump(d).encode()),
    st.binary(max_size=60),
    st.sampled_from(
        [
            b"a: &x [*x]\n",
            b"gpu_nodes:\n  hosts:\n    a:\n    a:\n",
            b"\xff\xfe",
            b"all:\n  hosts:\n    stray:\n",
            b"gpu_nodes: [unclosed\n",
        ]
    ),
)
flags = st.lists(
    st.sampled_from(
        [["-v"], ["-vv"], ["--artifacts", "runs"], ["--artifacts", "hosts.yml"], ["--artifacts", ""], ["-i", "missing"]]
    ),
    max_size=2,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inventories(),
    st.sampled_from(["hosts.yml", "group_vars/all/gpuready.yml", "group_vars/gpu_nodes.yml"]),
    st.one_of(st.none(), raw),
    flags,
)
def test_the_command_line_never_shows_a_traceback(
    doc: dict[str, dict], target: str, content: bytes | None, extra: list[list[str]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        inv = _write(Path(tmp), doc)
        if content is not None:
            (inv / target).parent.mkdir(parents=True, exist_ok=True)
            (inv / target).write_bytes(content)
        argv = ["inventory", "check", "-i", str(inv), "--artifacts", str(Path(tmp) / "runs")]
        for flag in extra:
            argv += [str(inv / f) if f in ("hosts.yml", "missing", "runs") else f for f in flag]
        code, out, err = _run(argv)
    assert "Traceback" not in out + err
    assert code in (0, 1, 2, 3), (code, err)
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("gpuready: error: ")]
        assert len(errors) == 1, err


def _write(root: Path, doc: dict[str, dict]) -> Path:
    inv = root / "inv"
    shutil.rmtree(inv, ignore_errors=True)
    (inv / "group_vars" / "all").mkdir(parents=True)
    (inv / "hosts.yml").write_text(yaml.safe_dump(doc))
    (inv / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump(settings_doc))
    return inv


def _run(argv: list[str]) -> tuple[int, str, str]:
    """The real entry point in this process (a child process per example would take minutes)."""
    from gpuready.core import cli

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["gpuready", *argv]
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as e:
                code = e.code
            except Exception:  # what the user would see as a traceback
                import traceback

                traceback.print_exc(file=err)
                code = -1
    finally:
        sys.argv = saved
    return (code if isinstance(code, int) else 2), out.getvalue(), err.getvalue()
