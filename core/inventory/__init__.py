"""Load an Ansible YAML inventory and gpuready's settings from it, refusing anything wrong early.

Every problem becomes one :class:`~gpuready.core.errors.BadInput` line naming the file and
the key, before anything runs.
"""

from __future__ import annotations

import difflib
import fnmatch
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpuready.core.bulk import no_cycle_collection
from gpuready.core.errors import BadInput
from gpuready.core.inventory.values import check_connection_vars, check_names, reserved_host
from gpuready.core.inventory.vault import Vault, is_vaulted

if TYPE_CHECKING:
    from gpuready.core.settings import NodeClass, Settings

    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml parses when present

log = logging.getLogger(__name__)

KNOWN_GROUPS = {
    "gpu_nodes": "GPU servers gpuready provisions and validates",
    "kube_control_plane": "where the Kubernetes/OpenShift API is reached from",
    "esxi_hosts": "ESXi hosts whose GPUs are passed through to VMs",
    "vcenter": "the vCenter (or standalone ESXi) gpuready talks to",
}
#: A group under gpu_nodes: GPU nodes gpuready reaches only through the Kubernetes API (their operating system
#: is provisioned elsewhere, or simulated, as the lab's kwok nodes are). The host layers of site.yml skip them.
KUBE_ONLY_GROUP = "kube_only_nodes"
SETTINGS_VAR = "gpuready"
SETTINGS_FILE = Path("group_vars/all/gpuready.yml")
_IMPLICIT_GROUPS = {"all", "ungrouped"}


#: An inventory file larger than this is refused before it is parsed.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Hosts that Ansible host ranges (``gpu[001:128]``) may expand to, in one hosts.yml: twice the 50,000 hosts of the
#: scale benchmark (BENCHMARKS.md), which hold about 274 MB; a range past it is refused before it is expanded.
MAX_RANGE_HOSTS = 100_000
#: YAML aliases may repeat a node; a document that expands past this many nodes is an alias bomb.
MAX_EXPANDED_NODES = 2_000_000


class _InventoryYamlLoader(_SafeLoader):
    """Safe YAML that also accepts Ansible's tags (vaulted strings are kept opaque), and refuses a key
    given twice in one mapping (PyYAML would silently keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Mark] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first at line {seen[key].line + 1}; "
                        "YAML would silently keep only the last)",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _opaque(loader: yaml.SafeLoader, node: yaml.Node) -> object:
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None


def _vaulted(loader: yaml.SafeLoader, node: yaml.Node) -> object:
    value = _opaque(loader, node)
    sink = getattr(loader, "vaulted", None)
    if sink is not None and isinstance(value, str):
        sink.append((node.start_mark.line + 1, value))
    return value


_InventoryYamlLoader.add_constructor("!vault", _vaulted)
_InventoryYamlLoader.add_constructor("!unsafe", _opaque)


def read_yaml(path: Path, base: Path | None = None, vault: Vault | None = None) -> Any:
    """Parse one inventory YAML file, refusing what would hang or mislead Ansible: bytes that are not
    UTF-8, a file too large, aliases that expand without bound, a key given twice, Ansible Vault that the
    configured password does not open (a file encrypted whole is decrypted, then read)."""
    shown = _shown(path, base)
    vault = vault or Vault()
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise BadInput(f"{shown}: larger than {MAX_FILE_BYTES // 2**20} MiB; refusing to read it")
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw[: e.start].count(b"\n") + 1
            raise BadInput(
                f"{shown}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); save the file as UTF-8"
            ) from None
        if is_vaulted(text):
            text = vault.decrypt(text, shown)
        loader = _InventoryYamlLoader(text)
        vaulted: list[tuple[int, str]] = []
        loader.vaulted = vaulted  # type: ignore[attr-defined]
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node, shown)
            document = loader.construct_document(node)
        finally:
            loader.dispose()
        for line, value in vaulted:
            vault.check(value, f"{shown}:{line}")
        return document
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{shown}:{mark.line + 1}" if mark else shown
        raise BadInput(f"{where}: malformed YAML: {e.problem or e.context}") from e
    except yaml.YAMLError as e:
        raise BadInput(f"{shown}: malformed YAML: {e}") from e
    except OSError as e:
        raise BadInput(f"{shown}: cannot read: {e.strerror}") from e
    except RecursionError:
        raise BadInput(f"{shown}: YAML nested too deeply") from None


def _check_expansion(root: yaml.Node, shown: str) -> None:
    """Count the nodes the document has once every alias is expanded (each node counted once per use,
    computed without expanding), and refuse a recursive alias."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise BadInput(f"{shown}:{node.start_mark.line + 1}: a YAML alias refers to itself")
        on_path.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        on_path.discard(key)
        sizes[key] = total
        if total > MAX_EXPANDED_NODES:
            raise BadInput(
                f"{shown}:{node.start_mark.line + 1}: YAML aliases expand to more than "
                f"{MAX_EXPANDED_NODES:,} values (an alias bomb?); refusing it"
            )
        return total

    size(root)


def _shown(path: Path, base: Path | None) -> str:
    try:
        return str(path.relative_to(base)) if base else str(path)
    except ValueError:
        return str(path)


@dataclass
class Inventory:
    """A checked inventory: its groups and hosts, and the validated ``gpuready`` settings."""

    path: Path
    settings: Settings
    settings_file: Path
    groups: dict[str, list[str]]
    host_groups: dict[str, list[str]] = field(default_factory=dict)
    _manager: Any = field(default=None, repr=False)
    _merged: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _group_vars: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict, repr=False)

    def hosts(self, group: str) -> list[str]:
        return list(self.groups.get(group, []))

    def node_class_name(self, host: str) -> str:
        return self.host_vars(host).get("gpuready_node_class") or next(iter(self.settings.node_classes))

    def node_class(self, host: str) -> NodeClass:
        return self.settings.node_classes[self.node_class_name(host)]

    def host_vars(self, host: str) -> dict[str, Any]:
        """The host's variables as Ansible merges them from the inventory (untemplated), merged once per host."""
        if host not in self._merged:
            from ansible.errors import AnsibleError

            try:
                self._merged[host] = self._inventory_vars(self._manager.get_host(host))
            except AnsibleError as e:
                raise BadInput(f"{self.path}: host {host}: cannot read its variables: {str(e).splitlines()[0]}") from e
        return self._merged[host]

    def _inventory_vars(self, host: Any) -> dict[str, Any]:
        """Ansible's own merge (VariableManager.get_vars, in the order of its VARIABLE_PRECEDENCE setting) of the
        inventory's variables: group vars, group_vars/, host vars, host_vars/. Without play, facts and magic
        variables, whose ``groups`` map costs O(hosts) per host; the group part is merged once per set of groups.
        """
        from ansible import constants as C
        from ansible.inventory.helpers import get_group_vars, sort_groups
        from ansible.utils.vars import combine_vars
        from ansible.vars.plugins import get_vars_from_inventory_sources

        def plugins(entities: list[Any]) -> dict[str, Any]:
            found: dict[str, Any] = get_vars_from_inventory_sources(
                self._manager._loader, self._manager._sources, entities, "task"
            )
            return found

        groups = sort_groups([g for g in host.get_groups() if g.name != "all"])
        key = tuple(g.name for g in groups)
        if key not in self._group_vars:
            everyone = self._manager.groups["all"]
            parts: dict[str, Callable[[], Any]] = {
                "all_inventory": lambda: everyone.get_vars(),
                "all_plugins_inventory": lambda: plugins([everyone]),
                "groups_inventory": lambda: get_group_vars(groups),
                "groups_plugins_inventory": lambda: plugins(groups),
            }
            merged: dict[str, Any] = {}
            for entry in C.VARIABLE_PRECEDENCE:
                if entry in parts:
                    merged = combine_vars(merged, parts[entry]())
            self._group_vars[key] = merged
        merged_vars: dict[str, Any] = combine_vars(
            combine_vars(self._group_vars[key], host.get_vars()), plugins([host])
        )
        return merged_vars

    def limit(self, pattern: str | None, group: str = "all") -> list[str]:
        """Hosts of ``group`` matched by an Ansible ``--limit`` pattern.

        A limit never widens a run: an empty pattern, one Ansible cannot parse, or one matching no
        host is refused, never read as "every host".
        """
        hosts = list(self.host_groups) if group == "all" else self.hosts(group)
        if pattern is None:
            return hosts
        from ansible.errors import AnsibleError

        try:
            matched = {h.name for h in self._manager.get_hosts(check_limit(pattern))}
        except (AnsibleError, re.error, ValueError) as e:
            raise BadInput(f"--limit {pattern!r}: not a valid host pattern: {str(e).splitlines()[0]}") from None
        chosen = [h for h in hosts if h in matched]
        if not chosen:
            where = "" if group == "all" else f" of group {group!r}"
            raise BadInput(f"--limit {pattern!r} matches no host{where} in {self.path}{_hosts_hint(pattern, hosts)}")
        return chosen


#: Host names a refused --limit lists, so the line stays one line at 1000 hosts.
HOSTS_LISTED = 5


def _hosts_hint(pattern: str, hosts: list[str]) -> str:
    """The next step after a --limit that matched nothing: the closest host name, and the hosts there are."""
    if not hosts:
        return " (it has no hosts)"
    close = difflib.get_close_matches(pattern, hosts, n=1)
    named = ", ".join(hosts[:HOSTS_LISTED]) + (
        f" and {len(hosts) - HOSTS_LISTED} more" if len(hosts) > HOSTS_LISTED else ""
    )
    return f" (its hosts: {named}" + (f"; did you mean {close[0]}?)" if close else ")")


_LIMIT_PART = re.compile(r"[!&]?(~.+|[^\[\]~!&@,\s]+(\[-?\d+(:-?\d*)?\])?)")


def check_limit(pattern: str) -> str:
    """Refuse a ``--limit`` Ansible would misread: empty, or with a regular expression that does not compile."""
    from ansible.inventory.manager import split_host_pattern

    if not pattern.strip() or not [p for p in pattern.split(",") if p.strip()]:
        raise BadInput(f"--limit {pattern!r}: empty pattern (name hosts or groups, e.g. gpu01 or gpu_nodes)")
    # Regular expressions are checked on the user's text: Ansible's splitter may cut '~[a' into '~' and 'a',
    # and a bare '~' is the empty expression, which matches every host.
    for part in (p.strip().lstrip("!&") for p in pattern.split(",")):
        if part.startswith("~"):
            try:
                re.compile(part[1:])
            except re.error as e:
                raise BadInput(f"--limit {pattern!r}: {part!r} is not a valid regular expression: {e}") from None
    parts = split_host_pattern(pattern)
    if not parts:
        raise BadInput(
            f"--limit {pattern!r}: cannot read this pattern (a host or group name, a wildcard, "
            "name[0] or name[0:9], or ~regex)"
        )
    for part in parts:
        bare = part.strip().lstrip("!&")
        if bare.startswith("@"):
            raise BadInput(f"--limit {pattern!r}: a file of hosts (@file) is not supported; list the hosts")
        if bare in ("", "~"):
            raise BadInput(f"--limit {pattern!r}: an empty part in the pattern (it would match every host)")
        # Ansible drops parts it cannot read and, left with none, selects every host: only readable parts pass.
        if not _LIMIT_PART.fullmatch(part.strip()):
            raise BadInput(
                f"--limit {pattern!r}: cannot read {part.strip()!r} (a host or group name, a wildcard, "
                "name[0] or name[0:9], or ~regex)"
            )
        if _matches_group_all(part.strip()):
            raise BadInput(
                f"--limit {pattern!r}: {part.strip()!r} also matches the group 'all', so Ansible would run on "
                "every host; anchor it to your names (e.g. '~^gpu') or write 'all' to mean every host"
            )
    return pattern


def _matches_group_all(part: str) -> bool:
    """Does a wildcard or ``~regex`` part (not ``all`` or ``*`` themselves) match the group name ``all``? Ansible
    matches patterns against group names as well as host names (``InventoryManager._match_list``: fnmatch, or
    ``re.match`` for ``~``), and a match on ``all`` selects every host."""
    if part.startswith(("!", "&")) or part in ("all", "*"):
        return False  # an exclusion or intersection narrows; 'all' and '*' say "every host" in so many words
    if part.startswith("~"):
        return re.compile(part[1:]).match("all") is not None
    name = re.sub(r"\[[-\d:]*\]$", "", part)
    return any(c in name for c in "*?[") and fnmatch.fnmatchcase("all", name)


def hosts_file(path: Path) -> Path:
    if not path.exists():
        raise BadInput(f"{path}: inventory not found{_inventory_hint(path)}")
    if path.is_file():
        return path
    for name in ("hosts.yml", "hosts.yaml"):
        if (path / name).is_file():
            return path / name
    raise BadInput(f"{path}: no hosts.yml in this inventory folder")


def _inventory_hint(path: Path) -> str:
    """The next step after an inventory path that does not exist: the closest inventory beside it (a folder with a
    hosts file, or a YAML file), else how to get the examples."""
    parent = path.parent
    try:
        beside = [
            p.name
            for p in parent.iterdir()
            if (p.is_dir() and any((p / n).is_file() for n in ("hosts.yml", "hosts.yaml")))
            or (p.is_file() and p.suffix in (".yml", ".yaml"))
        ]
    except OSError:
        beside = []
    close = difflib.get_close_matches(path.name, sorted(beside), n=1)
    if close:
        return f" (did you mean {parent / close[0] if str(parent) != '.' else close[0]}?)"
    return " (gpuready inventory init writes the example inventories into ./inventories)"


def checked_files(path: Path) -> tuple[Path, list[Path]]:
    """The files a loaded inventory is read from: the hosts file, and the files under group_vars/ and host_vars/
    beside it (gpuready's settings and host variables come from there, the latter through Ansible's own
    host_group_vars plugin). What Ansible is given to run on (``runner.staged_inventory``), so that it runs on
    what was checked and on nothing else in the folder. Symbolic links are followed, each folder once."""
    hosts_path = hosts_file(path)
    base = hosts_path.parent
    found: list[Path] = []
    seen: set[str] = set()
    for sub in ("group_vars", "host_vars"):
        for parent, folders, files in os.walk(base / sub, followlinks=True):
            if os.path.realpath(parent) in seen:
                folders[:] = []  # a link back up the tree
                continue
            seen.add(os.path.realpath(parent))
            folders.sort()
            found += [Path(parent, name) for name in sorted(files) if os.path.isfile(os.path.join(parent, name))]
    return hosts_path, found


def load(path: str | os.PathLike[str]) -> Inventory:
    """Check and load an inventory (a folder with hosts.yml and group_vars/, or a hosts file)."""
    with no_cycle_collection():
        return _load(Path(path))


def _load(path: Path) -> Inventory:
    hosts_path = hosts_file(path)
    base = hosts_path.parent
    vault = Vault()
    documents = {p: read_yaml(p, base.parent, vault) for p in _yaml_files(base, hosts_path)}
    if not isinstance(documents.get(hosts_path), dict):
        raise BadInput(f"{_shown(hosts_path, base.parent)}: an inventory must be a YAML mapping of groups")
    for file, document in documents.items():
        if file != hosts_path and document is not None and not isinstance(document, dict):
            raise BadInput(
                f"{_shown(file, base.parent)}: variables must be a YAML mapping of names to values "
                f"(got a {type(document).__name__})"
            )
    _check_host_ranges(documents[hosts_path], _shown(hosts_path, base.parent))
    manager = _ansible_inventory(hosts_path, {hosts_path: documents[hosts_path]}, vault.loaded_secrets())
    check_names(manager, _shown(hosts_path, base.parent))
    groups = _groups(manager, hosts_path, base)
    settings_file, settings = _settings(documents, base)
    settings = _resolve_paths(settings, base.resolve())
    inventory = Inventory(path=path, settings=settings, settings_file=settings_file, groups=groups, _manager=manager)
    inventory.host_groups = {h.name: sorted(g.name for g in h.get_groups()) for h in manager.get_hosts()}
    _check_host_vars(inventory)
    return inventory


_RANGE = re.compile(r"\[([^\[\]]*)\]")


def _range_size(name: str) -> int:
    """How many hosts a name with Ansible host ranges (``gpu[01:64]``, ``rack[a:f]-n[1:8:2]``) stands for, counted
    the way ``ansible.plugins.inventory.expand_hostname_range`` expands it, without expanding it. A bracket Ansible
    cannot read counts as one name (Ansible reports it)."""
    import string

    total = 1
    for bounds in (m.group(1).split(":") for m in _RANGE.finditer(name)):
        if len(bounds) not in (2, 3):
            continue
        beg, end, step = bounds[0] or "0", bounds[1], bounds[2] if len(bounds) == 3 else "1"
        try:
            if beg in string.ascii_letters and end in string.ascii_letters:
                count = len(
                    string.ascii_letters[
                        string.ascii_letters.index(beg) : string.ascii_letters.index(end) + 1 : int(step)
                    ]
                )
            else:
                count = len(range(int(beg), int(end) + 1, int(step)))
        except ValueError:
            continue
        total *= max(count, 1)
    return total


def _check_host_ranges(document: Any, shown: str) -> None:
    """Refuse host ranges that would expand past :data:`MAX_RANGE_HOSTS`, counted before Ansible expands them
    (``gpu[00000000:99999999]`` is a hundred million names: all the memory, then a MemoryError), and hosts
    named as Ansible's built-in groups."""
    total = 0
    groups = [document] if isinstance(document, dict) else []
    while groups:
        for body in groups.pop().values():
            if not isinstance(body, dict):
                continue
            hosts = body.get("hosts")
            for name in hosts if isinstance(hosts, dict) else ():
                reserved_host(str(name), shown)
                if "[" not in str(name):
                    continue
                size = _range_size(str(name))
                total += size
                if size > MAX_RANGE_HOSTS or total > MAX_RANGE_HOSTS:
                    raise BadInput(
                        f"{shown}: host range {str(name)!r} expands to {size:,} hosts"
                        + (f" ({total:,} from ranges in all)" if total > size else "")
                        + f"; at most {MAX_RANGE_HOSTS:,} hosts may come from ranges (list more in hosts.yml, "
                        "or split the inventory)"
                    )
            if isinstance(body.get("children"), dict):
                groups.append(body["children"])


#: Set to 1 to let group_vars/ and host_vars/ files be links to files outside the inventory folder.
OUTSIDE_LINKS_ENV = "GPUREADY_INVENTORY_LINKS_OUTSIDE"


def _yaml_files(base: Path, hosts_path: Path) -> list[Path]:
    """The hosts file, then the variables files of group_vars/ and host_vars/ as Ansible finds them: through links
    to folders too (``group_vars/all`` may be one), each folder once. A file or folder whose real path is
    outside the inventory folder is refused (a link to /etc/shadow is not variables) unless
    ``GPUREADY_INVENTORY_LINKS_OUTSIDE=1`` allows it."""
    tree = base.resolve()
    outside_allowed = os.environ.get(OUTSIDE_LINKS_ENV, "") == "1"
    files = [hosts_path]
    seen: set[str] = set()

    def inside(path: Path) -> None:
        real = Path(os.path.realpath(path))
        if not outside_allowed and real != tree and tree not in real.parents:
            raise BadInput(
                f"{_shown(path, base.parent)}: a link to {real}, outside the inventory folder {tree}; "
                f"copy it into the inventory, or set {OUTSIDE_LINKS_ENV}=1 to read it there"
            )

    for sub in ("group_vars", "host_vars"):
        top = base / sub
        if not top.is_dir():
            continue
        for folder, subfolders, names in os.walk(top, followlinks=True):
            here = Path(folder)
            inside(here)
            real = os.path.realpath(here)
            if real in seen:  # a link back up the tree
                subfolders[:] = []
                continue
            seen.add(real)
            subfolders[:] = sorted(d for d in subfolders if _vars_entry(d) and not Path(d).suffix)
            for name in sorted(names):
                file = here / name
                if _vars_entry(name) and file.suffix in VARS_SUFFIXES and file.is_file():
                    inside(file)
                    files.append(file)
    return files


#: The files Ansible's host_group_vars plugin reads as variables: YAML, JSON, or no extension at all
#: (``yaml_valid_extensions``, and DataLoader.find_vars_files); folders without an extension are searched.
VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


def _vars_entry(name: str) -> bool:
    # Ansible skips hidden files and editor backups (DataLoader._get_dir_vars_files).
    return not name.startswith(".") and not name.endswith("~")


def _strict_inventory_manager() -> Any:
    """Ansible's InventoryManager, refusing what Ansible only warns about, without changing ansible.constants
    (other code in this process, and ansible-playbook runs, keep the user's settings)."""
    from ansible import constants as C
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.plugins.loader import inventory_loader

    class StrictInventoryManager(InventoryManager):  # type: ignore[misc]
        def _fetch_inventory_plugins(self) -> list[Any]:
            return [_Refusing(inventory_loader.get(name)) for name in INVENTORY_PLUGINS]

        def parse_source(self, source: str, cache: bool = False) -> bool:
            # Ansible only warns about an inventory it cannot parse and goes on with none; we refuse.
            if not super().parse_source(source, cache=cache):
                raise AnsibleError(f"Completely failed to parse inventory source {source}")
            return True

        def _enumerate_matches(self, pattern: str) -> list[Any]:
            # A pattern that matches nothing: we report it ourselves, as one line, instead of Ansible's warning.
            if (
                pattern not in C.LOCALHOST
                and not self._match_list(self._inventory.groups, pattern)
                and not self._match_list(self._inventory.hosts, pattern)
            ):
                return []
            matches: list[Any] = super()._enumerate_matches(pattern)
            return matches

    return StrictInventoryManager


INVENTORY_PLUGINS = ("yaml", "ini")


class _Unparsed(BaseException):
    """An inventory plugin failed on the file it accepted. A BaseException, so that it leaves Ansible's
    parse_source, which would otherwise try the next plugin and print each plugin's failure as a block of
    warnings; the loader turns it into one line with the cause."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(cause)
        self.cause = cause


class _Refusing:
    """An inventory plugin whose parse failure is the answer (raised as :class:`_Unparsed`)."""

    def __init__(self, plugin: Any) -> None:
        self._plugin = plugin

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plugin, name)

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._plugin.parse(*args, **kwargs)
        except Exception as e:
            raise _Unparsed(e) from e


def _cause(error: BaseException) -> str:
    """The first line of Ansible's message, with what to write for a mistake YAML inventories often have."""
    message = getattr(error, "message", None) or str(error)
    line = str(message).strip().split("\n")[0]
    if 'Invalid "hosts" entry' in line and "list" in line:
        line += " (write hosts as a mapping of names, e.g. 'hosts: {gpu01: {}, gpu02: {}}', not a list)"
    return line


def _data_loader(parsed: dict[Path, Any], vault_secrets: list[tuple[str, Any]] | None = None) -> Any:
    """Ansible's DataLoader, given the files gpuready has already parsed (and checked: UTF-8, size, aliases,
    duplicate keys), so Ansible's inventory plugin does not parse a 10,000-host hosts.yml a second time; and
    without the deep copy of a file read uncached (``cache='none'``, how inventory plugins read): nothing else
    holds that data, and the copy cost as much as the parse."""
    from ansible.parsing.dataloader import DataLoader

    given = {str(path.resolve()): data for path, data in parsed.items()}

    class CheckedDataLoader(DataLoader):  # type: ignore[misc]
        def load_from_file(self, file_name: str, cache: str = "all", unsafe: bool = False, **kwargs: Any) -> Any:
            if cache == "none":
                known = given.pop(os.path.realpath(self.path_dwim(file_name)), None)
                if known is not None:
                    return known
            return super().load_from_file(file_name, cache=cache, unsafe=unsafe or cache == "none", **kwargs)

    loader = CheckedDataLoader()
    if vault_secrets:
        loader.set_vault_secrets(vault_secrets)
    return loader


def _ansible_inventory(
    hosts_path: Path, parsed: dict[Path, Any] | None = None, vault_secrets: list[tuple[str, Any]] | None = None
) -> Any:
    from ansible.errors import AnsibleError

    try:
        return _strict_inventory_manager()(loader=_data_loader(parsed or {}, vault_secrets), sources=[str(hosts_path)])
    except _Unparsed as e:
        _local_folder(e.cause)
        raise BadInput(f"{hosts_path}: not a valid Ansible inventory: {_cause(e.cause)}") from None
    except AnsibleError as e:
        _local_folder(e)
        message = str(e).split("\n")[0]
        raise BadInput(f"{hosts_path}: not a valid Ansible inventory: {message}") from e


def _local_folder(error: BaseException) -> None:
    """Ansible could not make its own folder on this machine (``~/.ansible/tmp``: its DEFAULT_LOCAL_TMP,
    https://docs.ansible.com/ansible/latest/reference_appendices/config.html#default-local-tmp): a read-only or
    missing HOME, not the inventory. Said as what it is, exit 3."""
    message = str(getattr(error, "message", None) or error).strip().split("\n")[0]
    if message.startswith("Unable to create local directories"):
        from gpuready.core.errors import Unreachable

        home = os.environ.get("HOME", "")
        raise Unreachable(
            f"Ansible cannot make its folder on this machine: {message} "
            f"(HOME={home}: make it writable, or set ANSIBLE_LOCAL_TEMP to a writable folder)"
        ) from None


def _groups(manager: Any, hosts_path: Path, base: Path) -> dict[str, list[str]]:
    top = manager.groups["all"].child_groups
    for group in top:
        if group.name not in KNOWN_GROUPS and group.name not in _IMPLICIT_GROUPS:
            known = ", ".join(KNOWN_GROUPS)
            raise BadInput(
                f"{_shown(hosts_path, base.parent)}: unknown group {group.name!r} (top-level groups: "
                f"{known}; put your own groups under one of them)"
            )
    for host in manager.groups["all"].get_hosts():
        if not {g.name for g in host.get_groups()} - _IMPLICIT_GROUPS:
            raise BadInput(
                f"{_shown(hosts_path, base.parent)}: host {host.name!r} is in no gpuready group "
                f"(put it under one of: {', '.join(KNOWN_GROUPS)})"
            )
    return {name: [h.name for h in manager.groups[name].get_hosts()] for name in KNOWN_GROUPS if name in manager.groups}


def _settings(documents: dict[Path, Any], base: Path) -> tuple[Path, Settings]:
    from pydantic import ValidationError

    from gpuready.core.settings import Settings

    defined = [p for p, doc in documents.items() if isinstance(doc, dict) and SETTINGS_VAR in doc]
    expected = base / SETTINGS_FILE
    if not defined:
        raise BadInput(f"{_shown(expected, base.parent)}: missing required variable {SETTINGS_VAR!r}")
    elsewhere = [p for p in defined if p != expected]
    if elsewhere:
        raise BadInput(f"{_shown(elsewhere[0], base.parent)}: {SETTINGS_VAR!r} belongs in {SETTINGS_FILE} only")
    document = documents[expected]
    for key in document:
        if key != SETTINGS_VAR:
            raise BadInput(
                f"{_shown(expected, base.parent)}: unknown key {key!r} (this file holds only {SETTINGS_VAR!r})"
            )
    try:
        return expected, Settings.model_validate(document[SETTINGS_VAR] or {})
    except ValidationError as e:
        raise BadInput(f"{_shown(expected, base.parent)}: {describe(e, SETTINGS_VAR)}") from e


def shipped_settings_file() -> Path:
    """The settings gpuready ships for this machine (the embedded inventories/local): no GPU class declared."""
    from importlib.resources import files

    return Path(str(files("gpuready.inventories") / "local")) / SETTINGS_FILE


def load_settings(path: Path) -> Settings:
    """The ``gpuready`` variable of one settings file (an inventory's group_vars/all/gpuready.yml, copied to a
    node that has no inventory), checked by the same schema; relative path settings are relative to its folder."""
    from pydantic import ValidationError

    from gpuready.core.settings import Settings

    if not path.is_file():
        raise BadInput(f"{path}: no such settings file")
    document = read_yaml(path)
    if not isinstance(document, dict) or SETTINGS_VAR not in document:
        raise BadInput(f"{path}: a settings file holds the variable {SETTINGS_VAR!r} (as {SETTINGS_FILE} does)")
    unknown = [k for k in document if k != SETTINGS_VAR]
    if unknown:
        raise BadInput(f"{path}: unknown key {unknown[0]!r} (this file holds only {SETTINGS_VAR!r})")
    try:
        settings = Settings.model_validate(document[SETTINGS_VAR] or {})
    except ValidationError as e:
        raise BadInput(f"{path}: {describe(e, SETTINGS_VAR)}") from e
    return _resolve_paths(settings, path.parent.resolve())


#: Settings that name files: (section, key). Resolved once, when the inventory is loaded.
PATH_SETTINGS = (("vsphere", "ca_file"), ("kubernetes", "kubeconfig"))


def _resolve_paths(settings: Settings, folder: Path) -> Settings:
    """Make every path setting absolute, a relative one relative to the inventory folder (where hosts.yml is,
    Ansible's ``inventory_dir``), so it means the same file whatever the working directory of gpuready or of
    the Ansible module that receives it."""
    sections: dict[str, Any] = {}
    for section, key in PATH_SETTINGS:
        current = sections.get(section) or getattr(settings, section, None)
        value = getattr(current, key, "")
        if value and current is not None:
            path = Path(value).expanduser()
            sections[section] = current.model_copy(update={key: str(path if path.is_absolute() else folder / path)})
    return settings.model_copy(update=sections) if sections else settings


def describe(error: Any, root: str) -> str:
    """One line for a pydantic ValidationError: the key path, what is wrong, what was given."""
    first = error.errors()[0]
    key = ".".join([root, *(str(p) for p in first["loc"])])
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{key}: unknown key"
    if kind == "missing":
        return f"{key}: missing required value"
    given = first.get("input")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{key}: {first['msg']} (got {given!r}){more}"


def _check_host_vars(inventory: Inventory) -> None:
    from gpuready.core.settings import HOST_VARS

    for host in inventory.host_groups:
        variables = inventory.host_vars(host)
        check_connection_vars(f"{inventory.path}: host {host}", variables)
        for key in variables:
            if key.startswith("gpuready_") and key not in HOST_VARS:
                raise BadInput(
                    f"{inventory.path}: host {host}: unknown variable {key!r} (known: {', '.join(HOST_VARS)})"
                )
    classes = inventory.settings.node_classes
    for host in inventory.hosts("gpu_nodes"):
        name = inventory.host_vars(host).get("gpuready_node_class")
        if name is None and len(classes) > 1:
            raise BadInput(
                f"{inventory.path}: host {host}: gpuready_node_class is required when there are "
                f"several node classes ({', '.join(classes)})"
            )
        if name is not None and name not in classes:
            raise BadInput(
                f"{inventory.path}: host {host}: gpuready_node_class {name!r} is not one of "
                f"gpuready.node_classes ({', '.join(classes)})"
            )
