"""Benchmark bundles: read/validate (`reader`), import (`importer`), export (`exporter`).

Below them: `source` (folder or zip), `rows` (typed row getters), `data` (a read bundle),
`problems`; the import's steps are `import_content`, `import_editions` and
`import_judging` over `import_history` and `import_base`; the history files (publications,
judge settings, audit log) are read by `history_read` and written by `history_export`.

The format is ../shared/spec/bundle-format.md. Import is all or nothing: every problem is
reported as `FILE:LINE: FIELD: message` (BundleError.problems) and nothing is written.
"""

from interchange.bundles.data import BundleData
from interchange.bundles.exporter import build_files, export_bundle
from interchange.bundles.importer import ImportResult, import_bundle, import_data
from interchange.bundles.problems import BundleError
from interchange.bundles.reader import read_bundle
from interchange.bundles.source import open_source

__all__ = [
    "BundleData",
    "BundleError",
    "ImportResult",
    "build_files",
    "export_bundle",
    "import_bundle",
    "import_data",
    "open_source",
    "read_bundle",
]
