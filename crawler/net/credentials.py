"""Basic credentials by host from a ``.netrc`` (``--netrc [FILE]``, as curl ``--netrc``).

Read by the standard library's ``netrc`` module. A ``machine`` entry's ``login`` and ``password`` go,
as ``Authorization: Basic``, to requests for that host name (any port, either scheme) and to
no other host: a redirect elsewhere carries none. The ``default`` entry is not used: a crawl
reaches hosts nobody named, and each would get the password. Credentials are never stored,
exported or logged (URLs are stored without userinfo; ``Authorization`` is never recorded).
"""

from __future__ import annotations

import os
from urllib.parse import quote

from crawler.errors import ConfigError

DEFAULT_NETRC = "~/.netrc"


def load_netrc(path: str) -> dict[str, str]:
    """``user:password`` (percent-encoded, as in a URL) by lower-case host name."""
    import netrc  # here: read only with --netrc (and shlex with it)

    file = os.path.expanduser(path or DEFAULT_NETRC)
    try:
        parsed = netrc.netrc(file)
    except FileNotFoundError:
        raise ConfigError(f"--netrc {file}: no such file") from None
    except netrc.NetrcParseError as exc:
        where = f"{exc.filename or file}:{exc.lineno}" if exc.lineno else file
        raise ConfigError(f"--netrc {where}: {exc.msg}") from None
    except OSError as exc:
        raise ConfigError(f"--netrc {file}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--netrc {file}: not text: {exc}") from None
    credentials: dict[str, str] = {}
    for host, (login, _account, password) in parsed.hosts.items():
        if host == "default" or not (login or password):
            continue
        name = host.strip().lower().rstrip(".").strip("[]")
        credentials[name] = f"{quote(login or '', safe='')}:{quote(password or '', safe='')}"
    return credentials
