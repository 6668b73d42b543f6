"""Ansible Vault in the inventory: the passwords Ansible would use, and a refusal when they cannot open it.

gpuready reads the inventory before ansible-playbook does, so a vaulted file or value that the given
password cannot open is bad input (exit 2) at load time, named with its file, line and vault id,
instead of a failed task in the middle of a run.

The passwords are the ones ansible-playbook finds itself: ``ANSIBLE_VAULT_PASSWORD_FILE`` (Ansible's
``DEFAULT_VAULT_PASSWORD_FILE`` setting, for the vault id ``default``) and ``ANSIBLE_VAULT_IDENTITY_LIST``
(``id@file`` entries). gpuready never prompts; an ``id@prompt`` entry counts as no password.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuready.core import redact
from gpuready.core.errors import BadInput, Unreachable

HEADER = "$ANSIBLE_VAULT;"
#: Where the passwords come from, as a user would set them.
HOW_TO_GIVE = "set ANSIBLE_VAULT_PASSWORD_FILE, or ANSIBLE_VAULT_IDENTITY_LIST=id@file for several vault ids"


def is_vaulted(text: str) -> bool:
    return text.lstrip().startswith(HEADER)


def vault_id(text: str) -> str:
    """The vault id in a vault envelope's header (``$ANSIBLE_VAULT;1.2;AES256;<id>``); ``default`` without one."""
    header = text.lstrip().split("\n", 1)[0].strip().split(";")
    return header[3] if len(header) > 3 and header[3] else "default"


@dataclass
class Vault:
    """The vault secrets configured for Ansible, read on first use (an inventory without Vault reads none)."""

    secrets: list[tuple[str, Any]] | None = None
    #: How each secret was given, for messages ("vault id 'default' from ANSIBLE_VAULT_PASSWORD_FILE").
    given: list[str] = field(default_factory=list)
    _lib: Any = None
    _checked: set[str] = field(default_factory=set)

    def decrypt(self, text: str, where: str) -> str:
        """The plaintext of a vault envelope, or one line saying which password is missing or wrong."""
        from ansible.errors import AnsibleError

        ident = vault_id(text)
        if self.secrets is None:
            self.secrets, self.given = _configured()
        if not self.secrets:
            raise BadInput(
                f"{where}: encrypted with Ansible Vault (vault id {ident!r}) and no vault password is given: "
                f"{HOW_TO_GIVE}"
            )
        if self._lib is None:
            from ansible.parsing.vault import VaultLib

            self._lib = VaultLib(self.secrets)
        try:
            plain = self._lib.decrypt(text.strip().encode())
        except AnsibleError as e:
            # Ansible says "Decryption failed" when no password opens the value; anything else (an envelope or
            # hex body it cannot read, an unknown cipher) is a value damaged in the file, whatever the password.
            said = str(getattr(e, "message", None) or e).strip().split("\n")[0]
            if "Decryption failed" not in said:
                raise BadInput(
                    f"{where}: not a whole Ansible Vault value ({said}); encrypt it again "
                    "(ansible-vault encrypt_string) and paste all of its lines"
                ) from None
            raise BadInput(
                f"{where}: encrypted with Ansible Vault (vault id {ident!r}), and the vault password given "
                f"({'; '.join(self.given)}) does not open it"
            ) from None
        try:
            return str(plain.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadInput(f"{where}: the Ansible Vault plaintext is not UTF-8 text") from None

    def check(self, text: str, where: str) -> None:
        """Refuse a vaulted value the passwords cannot open. One value per vault id is opened (each costs a key
        derivation); a password that opens one opens the others of its id."""
        ident = vault_id(text)
        if ident not in self._checked:
            self.decrypt(text, where)
            self._checked.add(ident)

    def loaded_secrets(self) -> list[tuple[str, Any]]:
        """The secrets, for Ansible's DataLoader (empty when nothing needed them)."""
        return self.secrets or []


def _configured() -> tuple[list[tuple[str, Any]], list[str]]:
    """The vault passwords Ansible is configured with in this environment, and how each was given."""
    from ansible import constants as C
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.parsing.vault import get_file_vault_secret

    from gpuready.core import cancel

    sources: list[tuple[str, str, str]] = []
    for entry in filter(None, C.DEFAULT_VAULT_IDENTITY_LIST or []):
        ident, _, source = str(entry).rpartition("@")
        sources.append((ident or C.DEFAULT_VAULT_IDENTITY, source, "ANSIBLE_VAULT_IDENTITY_LIST"))
    if C.DEFAULT_VAULT_PASSWORD_FILE:
        sources.append((C.DEFAULT_VAULT_IDENTITY, str(C.DEFAULT_VAULT_PASSWORD_FILE), "ANSIBLE_VAULT_PASSWORD_FILE"))
    secrets: list[tuple[str, Any]] = []
    given: list[str] = []
    loader = DataLoader()
    for ident, source, setting in sources:
        if source == "prompt":
            continue  # gpuready does not prompt
        try:
            secret = get_file_vault_secret(filename=source, vault_id=ident, loader=loader)
            # A password script runs here, and Ansible waits for it forever.
            seconds = cancel.credential_timeout_s()
            cancel.bounded(secret.load, seconds, f"{setting}: the vault password script {source}")
        except TimeoutError as e:
            raise Unreachable(f"{e} ($GPUREADY_CREDENTIAL_TIMEOUT_S sets the bound)") from None
        except (AnsibleError, OSError) as e:
            raise BadInput(f"{setting}: cannot read the vault password for vault id {ident!r}: {e}") from None
        if secret.bytes:
            redact.register(secret.bytes.decode("utf-8", "replace"))
        secrets.append((ident, secret))
        given.append(f"vault id {ident!r} from {setting}")
    return secrets, given
