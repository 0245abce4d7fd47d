"""bench/nginx.py's choice of port for a synthetic site: the one its links were written for."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.proc import ROOT as ROOT_DIR

BENCH = ROOT_DIR / "bench"


def test_a_generated_site_names_the_port_its_links_point_to(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import nginx
    finally:
        sys.path.remove(str(BENCH))
    site = tmp_path / "site"
    site.mkdir()
    assert nginx.site_port(site) is None  # any directory: no site.json
    (site / "site.json").write_text(json.dumps({"base_url": "http://127.0.0.1:18089"}))
    assert nginx.site_port(site) == 18089
    (site / "site.json").write_text(json.dumps({"base_url": "http://127.0.0.1"}))
    assert nginx.site_port(site) is None  # no port in it
    (site / "site.json").write_text("[1, 2")
    assert nginx.site_port(site) is None  # not JSON
    (site / "site.json").write_text(json.dumps(["http://127.0.0.1:1"]))
    assert nginx.site_port(site) is None  # not the summary's shape
