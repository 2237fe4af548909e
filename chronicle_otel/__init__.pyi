"""Type stub of chronicle_otel, written by scripts/gen_stubs.py from chronicle_otel/_api.py: do not edit."""

from . import cli as cli
from . import codec as codec
from . import config as config
from . import corpus as corpus
from . import environment_variables as environment_variables
from . import errors as errors
from . import export as export
from . import load as load
from . import model as model
from . import pytest_plugin as pytest_plugin
from . import record as record
from . import redact as redact
from . import replaying as replaying
from . import sampling as sampling
from . import semconv as semconv
from . import store as store
from . import testing as testing
from . import version as version
from ._assembled import Assembled as Assembled
from ._assembled import assemble as assemble
from .codec._registry import register_type as register_type
from .config._config import ChronicleConfig as ChronicleConfig
from .config._config import get_config as get_config
from .config._configure import configure as configure
from .config._options import CaptureOptions as CaptureOptions
from .config._options import PayloadOptions as PayloadOptions
from .config._options import RedactionOptions as RedactionOptions
from .config._options import StoreOptions as StoreOptions
from .errors import ChronicleError as ChronicleError
from .errors import ChronicleWarning as ChronicleWarning
from .errors import CodecError as CodecError
from .errors import ConfigError as ConfigError
from .errors import LoadLimitError as LoadLimitError
from .errors import NetworkBlockedError as NetworkBlockedError
from .errors import ReplayDivergence as ReplayDivergence
from .errors import ReplayError as ReplayError
from .errors import StoreError as StoreError
from .errors import TraceLoadError as TraceLoadError
from .errors import TraceNotFoundError as TraceNotFoundError
from .export._exporter import ChronicleExporter as ChronicleExporter
from .load import load_trace as load_trace
from .load._limits import LoadLimits as LoadLimits
from .load._write import write_trace as write_trace
from .model import Boundary as Boundary
from .model import ReplayedError as ReplayedError
from .model import Trace as Trace
from .record._boundary import boundary as boundary
from .record._call_block import call as call
from .record._changes import changed as changed
from .record._instrument import instrument as instrument
from .record._instrument import uninstrument as uninstrument
from .record._session import session as session
from .record._spec import BoundaryKind as BoundaryKind
from .replaying._report import ReplayReport as ReplayReport
from .replaying._run import ReplayRun as ReplayRun
from .replaying._run import replay as replay
from .sampling._report import SampleReport as SampleReport
from .sampling._run import sample as sample
from .store._local import LocalStore as LocalStore
from .store.reader import TraceSummary as TraceSummary
from .version import __version__ as __version__

__all__ = [
    "Assembled",
    "Boundary",
    "BoundaryKind",
    "CaptureOptions",
    "ChronicleConfig",
    "ChronicleError",
    "ChronicleExporter",
    "ChronicleWarning",
    "CodecError",
    "ConfigError",
    "LoadLimitError",
    "LoadLimits",
    "LocalStore",
    "NetworkBlockedError",
    "PayloadOptions",
    "RedactionOptions",
    "ReplayDivergence",
    "ReplayError",
    "ReplayReport",
    "ReplayRun",
    "ReplayedError",
    "SampleReport",
    "StoreError",
    "StoreOptions",
    "Trace",
    "TraceLoadError",
    "TraceNotFoundError",
    "TraceSummary",
    "__version__",
    "assemble",
    "boundary",
    "call",
    "changed",
    "configure",
    "get_config",
    "instrument",
    "load_trace",
    "register_type",
    "replay",
    "sample",
    "session",
    "uninstrument",
    "write_trace",
]
