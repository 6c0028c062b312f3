"""L2 of `envyard setup`: missing imports across a repository, counted the way EnvBench counts them.

EnvBench's verdict on a Python setup is `pyright ROOT --level error --outputjson`, run in ROOT with the
configured interpreter, and the number of diagnostics whose rule is `reportMissingImports`. pyright needs node,
so this module re-implements the part of pyright that produces that rule, in plain Python, to run *inside* the
sandbox with the environment's own interpreter. Nothing in the repository or the environment is imported or
executed: files are parsed with `ast` and modules are found by listing directories.

This file is also a standalone script (stdlib only, Python 3.7 to 3.13):

    cd ROOT && python -I importscan.py [--exclude NAME]... ROOT    →  one JSON line on stdout:
    {"files": 12,          # .py/.pyi files scanned
     "imports": 140,       # module names checked in reachable code (`import a, b` is two)
     "missing": [{"file": "pkg/a.py", "line": 3, "module": "yaml"}, ...],  # = EnvBench's reportMissingImports
     "stub_only": [...],   # same shape: not installed, but typeshed has stubs: not counted (5. below)
     "ignored": 1,         # missing, but silenced by `# type: ignore`, `# pyright: ignore` or configuration
     "errors": [{"file": "old.py", "error": "SyntaxError: ... (line 2)"}],  # scanned all the same (2.)
     "python": "3.11.7", "config": null, "typeshed": "pyright 1.1.414 (...)"}

`-I` keeps the script's own directory off `sys.path`; the interpreter's search paths are asked of a separate
`python -c` run in ROOT, the way pyright asks for them, so PYTHONPATH, user site-packages and `.pth` files
count as they do for pyright.

What pyright does, and this scan with it (read from pyright's import resolver, binder, checker and source
enumerator, and compared with pyright 1.1.414 on fixture trees and on copies of pip, numpy, networkx, IPython,
docutils, hypothesis, libcst and prompt_toolkit with interpreters 3.7 to 3.13: the same diagnostics, line
for line):

1. Files: every `.py` and `.pyi` under ROOT, sorted, each real directory once (symlinks followed), except
   `**/node_modules`, `**/__pycache__`, `**/.*`, `**/__editable__.*` and directories that look like virtual
   environments (`pyvenv.cfg`, `bin/activate`, `Scripts/activate`, `conda-meta`). `build/`, `dist/` and the
   like are scanned: pyright scans them too. `pyrightconfig.json`, or else `[tool.pyright]` in pyproject.toml,
   is read for exclude, ignore, extraPaths, stubPath, executionEnvironments (root, extraPaths), venvPath/venv,
   pythonVersion, pythonPlatform, defineConstant, typeCheckingMode, enableTypeIgnoreComments and
   reportMissingImports; its `include` is not, since `pyright ROOT` overrides it.
2. Which imports: one check per module name: `import a.b, c` checks `a.b` and `c`; `from a.b import c`
   checks `a.b` only (a missing `c` is another rule). Only reachable code counts: a branch whose condition
   is statically known is skipped (`sys.version_info` comparisons, `sys.version_info[0]`, `sys.platform` and
   `os.name` `==`/`!=`, `TYPE_CHECKING` (true), literals such as `False`, `0`, `""`, `None`, `()`, defined
   constants, `not`, `and`/`or`), and so is the code after `return`, `raise`, `continue`, `break`, `assert
   False` and `while True:` without a `break`. Like pyright, calls to `NoReturn` functions (`sys.exit()`)
   do not end reachability, and an import inside `try: ... except ImportError:` is reported.
   A `# type: ignore` (any rule list) or `# pyright: ignore` (bare or naming reportMissingImports) on the
   module name's line, a `# type: ignore` before any code, or `# pyright: reportMissingImports=false`
   silences it. A file `ast` cannot parse (Python 2, syntax newer than the interpreter) is listed under
   "errors" and scanned all the same, as pyright's parser recovers: Python 2's `print x`, `exec code`,
   `raise E, v`, `except E, e:`, `0777`, `10L`, `ur""` and `<>` are rewritten, then each top-level
   statement that still fails is parsed again with its failing lines replaced (by `pass`, or by a block
   header whose condition is unknown); imports on replaced lines are taken from the tokens, as reachable.
3. Absolute imports resolve in pyright's order: `typings/` (stubPath) → ROOT, the execution root → extra
   paths (`src/` when it exists without `__init__.py`, pyright's autoSearchPaths) → typeshed's stdlib stubs
   valid for the interpreter's version (a table below) → the interpreter's `sys.path` (less `''`) →
   typeshed's third-party stubs (a table below) → last, the importing file's own directory and its parents
   below ROOT. In each root: `a-stubs/` first, then `a/__init__.pyi|py`, `a.pyi|py`, `a.*.so|pyd|dylib`
   (not in the parents walk), then a directory without `__init__` (a namespace package, which resolves).
   A regular package that only partly resolves `a.b.c` beats a namespace chain that resolves all of it, so
   `import test.helpers` is missing when the stdlib's `test` package is installed beside a `./test/`.
   Modules compiled into the interpreter but absent from typeshed (`_sre`, `_abc`, ...) are missing, as for
   pyright: `sys.builtin_module_names` is not consulted.
4. Relative imports resolve against the file's directory (one level up per extra dot) and nowhere else.
   `from . import x` needs `x` (any file or directory named so) or an `__init__` in that directory; once a
   relative import name has resolved in a file, pyright's cache makes it resolve for the rest of that file.
5. A module only typeshed's bundled third-party stubs provide (`yaml`, `requests`, `six`, ... when they are
   not installed; `typing_extensions` too) is pyright's `reportMissingModuleSource`, a warning that `--level
   error` drops: EnvBench does not count it. It is listed under "stub_only": nothing provides it at run time.

Differences that remain:
- The typeshed tables are a snapshot (TYPESHED); EnvBench installs the newest pyright, whose typeshed may
  have added or dropped stub packages or stdlib modules since.
- A file that does not parse: pyright's parser recovers token by token, this scan line by line; an import
  whose own line does not parse is taken as reachable. Such files cost a pure-Python tokenize: a Python 2
  tree scans at about 30 files a second instead of hundreds.
- Not modelled: zip and egg files on sys.path, partial stub packages (`py.typed` with `partial`), a config's
  `extends`, per-executionEnvironment python versions and platforms, and imports that only the type checker
  proves unreachable (pyright's optional `enableReachabilityAnalysis`).

The engine uploads `script_source()` into the sandbox (e.g. to REMOTE_SCRIPT), runs `scan_command(python,
root)` there, and reads its stdout with `parse_scan()`. `--dump-typeshed DIR LABEL` prints the tables from a
typeshed checkout (pyright's `dist/typeshed-fallback`) to refresh them.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shlex
import subprocess
import sys
import tokenize
import zlib

TYPESHED = "pyright 1.1.414 (typeshed 289e5d3)"

# typeshed stdlib/VERSIONS: "module:min-max" (max empty when still present).
_STDLIB_VERSIONS = """__future__:3.0- __main__:3.0- _ast:3.0- _asyncio:3.0- _bisect:3.0- _blake2:3.6- _bz2:3.3- _codecs:3.0-
_collections_abc:3.3- _compat_pickle:3.1- _compression:3.5-3.13 _contextvars:3.7- _csv:3.0- _ctypes:3.0-
_curses:3.0- _curses_panel:3.0- _dbm:3.0- _decimal:3.3- _frozen_importlib:3.0- _frozen_importlib_external:3.5-
_gdbm:3.0- _hashlib:3.0- _heapq:3.0- _imp:3.0- _interpchannels:3.13- _interpqueues:3.13- _interpreters:3.13-
_io:3.0- _json:3.0- _locale:3.0- _lsprof:3.0- _lzma:3.3- _markupbase:3.0- _msi:3.0-3.12 _multibytecodec:3.0-
_operator:3.4- _osx_support:3.0- _pickle:3.0- _posixsubprocess:3.2- _py_abc:3.7- _pydecimal:3.5- _queue:3.7-
_random:3.0- _remote_debugging:3.15- _sitebuiltins:3.4- _socket:3.0- _sqlite3:3.0- _ssl:3.0- _stat:3.4-
_struct:3.0- _thread:3.0- _threading_local:3.0- _tkinter:3.0- _tracemalloc:3.4- _typeshed:3.0- _warnings:3.0-
_weakref:3.0- _weakrefset:3.0- _winapi:3.3- _zstd:3.14- abc:3.0- aifc:3.0-3.12 annotationlib:3.14-
antigravity:3.0- argparse:3.0- array:3.0- ast:3.0- asynchat:3.0-3.11 asyncio:3.4- asyncio.exceptions:3.8-
asyncio.format_helpers:3.7- asyncio.graph:3.14- asyncio.mixins:3.10- asyncio.runners:3.7-
asyncio.staggered:3.8- asyncio.taskgroups:3.11- asyncio.threads:3.9- asyncio.timeouts:3.11- asyncio.tools:3.14-
asyncio.trsock:3.8- asyncore:3.0-3.11 atexit:3.0- audioop:3.0-3.12 base64:3.0- bdb:3.0- binascii:3.0-
binhex:3.0-3.10 bisect:3.0- builtins:3.0- bz2:3.0- cProfile:3.0- calendar:3.0- cgi:3.0-3.12 cgitb:3.0-3.12
chunk:3.0-3.12 cmath:3.0- cmd:3.0- code:3.0- codecs:3.0- codeop:3.0- collections:3.0- collections.abc:3.3-
colorsys:3.0- compileall:3.0- compression:3.14- concurrent:3.2- concurrent.futures.interpreter:3.14-
concurrent.interpreters:3.14- configparser:3.0- contextlib:3.0- contextvars:3.7- copy:3.0- copyreg:3.0-
crypt:3.0-3.12 csv:3.0- ctypes:3.0- curses:3.0- dataclasses:3.7- datetime:3.0- dbm:3.0- dbm.sqlite3:3.13-
decimal:3.0- difflib:3.0- dis:3.0- distutils:3.0-3.11 distutils.command.bdist_msi:3.0-3.10 doctest:3.0-
email:3.0- encodings:3.0- encodings.cp1125:3.4- encodings.cp273:3.4- encodings.cp858:3.2- encodings.koi8_t:3.5-
encodings.kz1048:3.5- ensurepip:3.0- enum:3.4- errno:3.0- faulthandler:3.3- fcntl:3.0- filecmp:3.0-
fileinput:3.0- fnmatch:3.0- fractions:3.0- ftplib:3.0- functools:3.0- gc:3.0- genericpath:3.0- getopt:3.0-
getpass:3.0- gettext:3.0- glob:3.0- graphlib:3.9- grp:3.0- gzip:3.0- hashlib:3.0- heapq:3.0- hmac:3.0-
html:3.0- http:3.0- imaplib:3.0- imghdr:3.0-3.12 imp:3.0-3.11 importlib:3.0- importlib._abc:3.10-
importlib._bootstrap:3.0- importlib._bootstrap_external:3.5- importlib.metadata:3.8-
importlib.metadata._meta:3.10- importlib.metadata.diagnose:3.13- importlib.readers:3.10-
importlib.resources:3.7- importlib.resources._common:3.11- importlib.resources._functional:3.13-
importlib.resources.abc:3.11- importlib.resources.readers:3.11- importlib.resources.simple:3.11-
importlib.simple:3.11- inspect:3.0- io:3.0- ipaddress:3.3- itertools:3.0- json:3.0- keyword:3.0-
lib2to3:3.0-3.12 linecache:3.0- locale:3.0- logging:3.0- lzma:3.3- mailbox:3.0- mailcap:3.0-3.12 marshal:3.0-
math:3.0- math.integer:3.15- mimetypes:3.0- mmap:3.0- modulefinder:3.0- msilib:3.0-3.12 msvcrt:3.0-
multiprocessing:3.0- multiprocessing.resource_tracker:3.8- multiprocessing.shared_memory:3.8- netrc:3.0-
nis:3.0-3.12 nntplib:3.0-3.12 nt:3.0- ntpath:3.0- nturl2path:3.0- numbers:3.0- opcode:3.0- operator:3.0-
optparse:3.0- os:3.0- ossaudiodev:3.0-3.12 pathlib:3.4- pathlib.types:3.14- pdb:3.0- pickle:3.0-
pickletools:3.0- pipes:3.0-3.12 pkgutil:3.0- platform:3.0- plistlib:3.0- poplib:3.0- posix:3.0- posixpath:3.0-
pprint:3.0- profile:3.0- profiling:3.15- pstats:3.0- pty:3.0- pwd:3.0- py_compile:3.0- pyclbr:3.0- pydoc:3.0-
pydoc_data:3.0- pydoc_data.module_docs:3.13- pyexpat:3.0- queue:3.0- quopri:3.0- random:3.0- re:3.0-
readline:3.0- reprlib:3.0- resource:3.0- rlcompleter:3.0- runpy:3.0- sched:3.0- secrets:3.6- select:3.0-
selectors:3.4- shelve:3.0- shlex:3.0- shutil:3.0- signal:3.0- site:3.0- smtpd:3.0-3.11 smtplib:3.0-
sndhdr:3.0-3.12 socket:3.0- socketserver:3.0- spwd:3.0-3.12 sqlite3:3.0- sre_compile:3.0-3.14
sre_constants:3.0-3.14 sre_parse:3.0-3.14 ssl:3.0- stat:3.0- statistics:3.4- string:3.0-
string.templatelib:3.14- stringprep:3.0- struct:3.0- subprocess:3.0- sunau:3.0-3.12 symtable:3.0- sys:3.0-
sys.__jit:3.14- sys._monitoring:3.12- sysconfig:3.0- syslog:3.0- tabnanny:3.0- tarfile:3.0- telnetlib:3.0-3.12
tempfile:3.0- termios:3.0- textwrap:3.0- this:3.0- threading:3.0- time:3.0- timeit:3.0- tkinter:3.0-
tkinter.tix:3.0-3.12 token:3.0- tokenize:3.0- tomllib:3.11- trace:3.0- traceback:3.0- tracemalloc:3.4- tty:3.0-
turtle:3.0- types:3.0- typing:3.5- typing_extensions:3.0- unicodedata:3.0- unittest:3.0- unittest._log:3.9-
unittest.async_case:3.8- urllib:3.0- uu:3.0-3.12 uuid:3.0- venv:3.3- warnings:3.0- wave:3.0- weakref:3.0-
webbrowser:3.0- winreg:3.0- winsound:3.0- wsgiref:3.0- wsgiref.types:3.11- xdrlib:3.0-3.12 xml:3.0-
xml.utils:3.15- xmlrpc:3.0- xxlimited:3.2- zipapp:3.5- zipfile:3.0- zipfile._path:3.12- zipimport:3.0-
zlib:3.0- zoneinfo:3.9-"""

# Every module typeshed has stdlib stubs for.
_STDLIB_MODULES = """__future__ __main__ _ast _asyncio _bisect _blake2 _bz2 _codecs _collections_abc _compat_pickle _compression
_contextvars _csv _ctypes _curses _curses_panel _dbm _decimal _frozen_importlib _frozen_importlib_external
_gdbm _hashlib _heapq _imp _interpchannels _interpqueues _interpreters _io _json _locale _lsprof _lzma
_markupbase _msi _multibytecodec _operator _osx_support _pickle _posixsubprocess _py_abc _pydecimal _queue
_random _remote_debugging _sitebuiltins _socket _sqlite3 _ssl _stat _struct _thread _threading_local _tkinter
_tracemalloc _typeshed _typeshed._type_checker_internals _typeshed.dbapi _typeshed.importlib _typeshed.wsgi
_typeshed.xml _warnings _weakref _weakrefset _winapi _zstd abc aifc annotationlib antigravity argparse array
ast asynchat asyncio asyncio.base_events asyncio.base_futures asyncio.base_subprocess asyncio.base_tasks
asyncio.constants asyncio.coroutines asyncio.events asyncio.exceptions asyncio.format_helpers asyncio.futures
asyncio.graph asyncio.locks asyncio.log asyncio.mixins asyncio.proactor_events asyncio.protocols asyncio.queues
asyncio.runners asyncio.selector_events asyncio.sslproto asyncio.staggered asyncio.streams asyncio.subprocess
asyncio.taskgroups asyncio.tasks asyncio.threads asyncio.timeouts asyncio.tools asyncio.transports
asyncio.trsock asyncio.unix_events asyncio.windows_events asyncio.windows_utils asyncore atexit audioop base64
bdb binascii binhex bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs codeop
collections collections.abc colorsys compileall compression compression._common compression._common._streams
compression.bz2 compression.gzip compression.lzma compression.zlib compression.zstd compression.zstd._zstdfile
concurrent concurrent.futures concurrent.futures._base concurrent.futures.interpreter
concurrent.futures.process concurrent.futures.thread concurrent.interpreters
concurrent.interpreters._crossinterp concurrent.interpreters._queues configparser contextlib contextvars copy
copyreg crypt csv ctypes ctypes._endian ctypes.macholib ctypes.macholib.dyld ctypes.macholib.dylib
ctypes.macholib.framework ctypes.util ctypes.wintypes curses curses.ascii curses.has_key curses.panel
curses.textpad dataclasses datetime dbm dbm.dumb dbm.gnu dbm.ndbm dbm.sqlite3 decimal difflib dis distutils
distutils._msvccompiler distutils.archive_util distutils.bcppcompiler distutils.ccompiler distutils.cmd
distutils.command distutils.command.bdist distutils.command.bdist_dumb distutils.command.bdist_msi
distutils.command.bdist_packager distutils.command.bdist_rpm distutils.command.build
distutils.command.build_clib distutils.command.build_ext distutils.command.build_py
distutils.command.build_scripts distutils.command.check distutils.command.clean distutils.command.config
distutils.command.install distutils.command.install_data distutils.command.install_egg_info
distutils.command.install_headers distutils.command.install_lib distutils.command.install_scripts
distutils.command.register distutils.command.sdist distutils.command.upload distutils.config distutils.core
distutils.cygwinccompiler distutils.debug distutils.dep_util distutils.dir_util distutils.dist distutils.errors
distutils.extension distutils.fancy_getopt distutils.file_util distutils.filelist distutils.log
distutils.msvccompiler distutils.spawn distutils.sysconfig distutils.text_file distutils.unixccompiler
distutils.util distutils.version doctest email email._header_value_parser email._policybase email.base64mime
email.charset email.contentmanager email.encoders email.errors email.feedparser email.generator email.header
email.headerregistry email.iterators email.message email.mime email.mime.application email.mime.audio
email.mime.base email.mime.image email.mime.message email.mime.multipart email.mime.nonmultipart
email.mime.text email.parser email.policy email.quoprimime email.utils encodings encodings.aliases
encodings.ascii encodings.base64_codec encodings.big5 encodings.big5hkscs encodings.bz2_codec encodings.charmap
encodings.cp037 encodings.cp1006 encodings.cp1026 encodings.cp1125 encodings.cp1140 encodings.cp1250
encodings.cp1251 encodings.cp1252 encodings.cp1253 encodings.cp1254 encodings.cp1255 encodings.cp1256
encodings.cp1257 encodings.cp1258 encodings.cp273 encodings.cp424 encodings.cp437 encodings.cp500
encodings.cp720 encodings.cp737 encodings.cp775 encodings.cp850 encodings.cp852 encodings.cp855 encodings.cp856
encodings.cp857 encodings.cp858 encodings.cp860 encodings.cp861 encodings.cp862 encodings.cp863 encodings.cp864
encodings.cp865 encodings.cp866 encodings.cp869 encodings.cp874 encodings.cp875 encodings.cp932 encodings.cp949
encodings.cp950 encodings.euc_jis_2004 encodings.euc_jisx0213 encodings.euc_jp encodings.euc_kr
encodings.gb18030 encodings.gb2312 encodings.gbk encodings.hex_codec encodings.hp_roman8 encodings.hz
encodings.idna encodings.iso2022_jp encodings.iso2022_jp_1 encodings.iso2022_jp_2 encodings.iso2022_jp_2004
encodings.iso2022_jp_3 encodings.iso2022_jp_ext encodings.iso2022_kr encodings.iso8859_1 encodings.iso8859_10
encodings.iso8859_11 encodings.iso8859_13 encodings.iso8859_14 encodings.iso8859_15 encodings.iso8859_16
encodings.iso8859_2 encodings.iso8859_3 encodings.iso8859_4 encodings.iso8859_5 encodings.iso8859_6
encodings.iso8859_7 encodings.iso8859_8 encodings.iso8859_9 encodings.johab encodings.koi8_r encodings.koi8_t
encodings.koi8_u encodings.kz1048 encodings.latin_1 encodings.mac_arabic encodings.mac_croatian
encodings.mac_cyrillic encodings.mac_farsi encodings.mac_greek encodings.mac_iceland encodings.mac_latin2
encodings.mac_roman encodings.mac_romanian encodings.mac_turkish encodings.mbcs encodings.oem encodings.palmos
encodings.ptcp154 encodings.punycode encodings.quopri_codec encodings.raw_unicode_escape encodings.rot_13
encodings.shift_jis encodings.shift_jis_2004 encodings.shift_jisx0213 encodings.tis_620 encodings.undefined
encodings.unicode_escape encodings.utf_16 encodings.utf_16_be encodings.utf_16_le encodings.utf_32
encodings.utf_32_be encodings.utf_32_le encodings.utf_7 encodings.utf_8 encodings.utf_8_sig encodings.uu_codec
encodings.zlib_codec ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch fractions ftplib
functools gc genericpath getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html html.entities
html.parser http http.client http.cookiejar http.cookies http.server imaplib imghdr imp importlib
importlib._abc importlib._bootstrap importlib._bootstrap_external importlib.abc importlib.machinery
importlib.metadata importlib.metadata._meta importlib.metadata.diagnose importlib.readers importlib.resources
importlib.resources._common importlib.resources._functional importlib.resources.abc importlib.resources.readers
importlib.resources.simple importlib.simple importlib.util inspect io ipaddress itertools json json.decoder
json.encoder json.scanner json.tool keyword lib2to3 lib2to3.btm_matcher lib2to3.fixer_base lib2to3.fixes
lib2to3.fixes.fix_apply lib2to3.fixes.fix_asserts lib2to3.fixes.fix_basestring lib2to3.fixes.fix_buffer
lib2to3.fixes.fix_dict lib2to3.fixes.fix_except lib2to3.fixes.fix_exec lib2to3.fixes.fix_execfile
lib2to3.fixes.fix_exitfunc lib2to3.fixes.fix_filter lib2to3.fixes.fix_funcattrs lib2to3.fixes.fix_future
lib2to3.fixes.fix_getcwdu lib2to3.fixes.fix_has_key lib2to3.fixes.fix_idioms lib2to3.fixes.fix_import
lib2to3.fixes.fix_imports lib2to3.fixes.fix_imports2 lib2to3.fixes.fix_input lib2to3.fixes.fix_intern
lib2to3.fixes.fix_isinstance lib2to3.fixes.fix_itertools lib2to3.fixes.fix_itertools_imports
lib2to3.fixes.fix_long lib2to3.fixes.fix_map lib2to3.fixes.fix_metaclass lib2to3.fixes.fix_methodattrs
lib2to3.fixes.fix_ne lib2to3.fixes.fix_next lib2to3.fixes.fix_nonzero lib2to3.fixes.fix_numliterals
lib2to3.fixes.fix_operator lib2to3.fixes.fix_paren lib2to3.fixes.fix_print lib2to3.fixes.fix_raise
lib2to3.fixes.fix_raw_input lib2to3.fixes.fix_reduce lib2to3.fixes.fix_reload lib2to3.fixes.fix_renames
lib2to3.fixes.fix_repr lib2to3.fixes.fix_set_literal lib2to3.fixes.fix_standarderror lib2to3.fixes.fix_sys_exc
lib2to3.fixes.fix_throw lib2to3.fixes.fix_tuple_params lib2to3.fixes.fix_types lib2to3.fixes.fix_unicode
lib2to3.fixes.fix_urllib lib2to3.fixes.fix_ws_comma lib2to3.fixes.fix_xrange lib2to3.fixes.fix_xreadlines
lib2to3.fixes.fix_zip lib2to3.main lib2to3.pgen2 lib2to3.pgen2.driver lib2to3.pgen2.grammar
lib2to3.pgen2.literals lib2to3.pgen2.parse lib2to3.pgen2.pgen lib2to3.pgen2.token lib2to3.pgen2.tokenize
lib2to3.pygram lib2to3.pytree lib2to3.refactor linecache locale logging logging.config logging.handlers lzma
mailbox mailcap marshal math math.integer mimetypes mmap modulefinder msilib msilib.schema msilib.sequence
msilib.text msvcrt multiprocessing multiprocessing.connection multiprocessing.context multiprocessing.dummy
multiprocessing.dummy.connection multiprocessing.forkserver multiprocessing.heap multiprocessing.managers
multiprocessing.pool multiprocessing.popen_fork multiprocessing.popen_forkserver
multiprocessing.popen_spawn_posix multiprocessing.popen_spawn_win32 multiprocessing.process
multiprocessing.queues multiprocessing.reduction multiprocessing.resource_sharer
multiprocessing.resource_tracker multiprocessing.shared_memory multiprocessing.sharedctypes
multiprocessing.spawn multiprocessing.synchronize multiprocessing.util netrc nis nntplib nt ntpath nturl2path
numbers opcode operator optparse os os.path ossaudiodev pathlib pathlib.types pdb pickle pickletools pipes
pkgutil platform plistlib poplib posix posixpath pprint profile profiling profiling.sampling
profiling.sampling.collector profiling.sampling.gecko_collector profiling.sampling.heatmap_collector
profiling.sampling.jsonl_collector profiling.sampling.pstats_collector profiling.sampling.stack_collector
profiling.sampling.string_table profiling.tracing pstats pty pwd py_compile pyclbr pydoc pydoc_data
pydoc_data.module_docs pydoc_data.topics pyexpat pyexpat.errors pyexpat.model queue quopri random re readline
reprlib resource rlcompleter runpy sched secrets select selectors shelve shlex shutil signal site smtpd smtplib
sndhdr socket socketserver spwd sqlite3 sqlite3.dbapi2 sqlite3.dump sre_compile sre_constants sre_parse ssl
stat statistics string string.templatelib stringprep struct subprocess sunau symtable sys sys.__jit
sys._monitoring sysconfig syslog tabnanny tarfile telnetlib tempfile termios textwrap this threading time
timeit tkinter tkinter.colorchooser tkinter.commondialog tkinter.constants tkinter.dialog tkinter.dnd
tkinter.filedialog tkinter.font tkinter.messagebox tkinter.scrolledtext tkinter.simpledialog tkinter.tix
tkinter.ttk token tokenize tomllib trace traceback tracemalloc tty turtle types typing typing_extensions
unicodedata unittest unittest._log unittest.async_case unittest.case unittest.loader unittest.main
unittest.mock unittest.result unittest.runner unittest.signals unittest.suite unittest.util urllib urllib.error
urllib.parse urllib.request urllib.response urllib.robotparser uu uuid venv warnings wave weakref webbrowser
winreg winsound wsgiref wsgiref.handlers wsgiref.headers wsgiref.simple_server wsgiref.types wsgiref.util
wsgiref.validate xdrlib xml xml.dom xml.dom.NodeFilter xml.dom.domreg xml.dom.expatbuilder xml.dom.minicompat
xml.dom.minidom xml.dom.pulldom xml.dom.xmlbuilder xml.etree xml.etree.ElementInclude xml.etree.ElementPath
xml.etree.ElementTree xml.etree.cElementTree xml.parsers xml.parsers.expat xml.parsers.expat.errors
xml.parsers.expat.model xml.sax xml.sax._exceptions xml.sax.expatreader xml.sax.handler xml.sax.saxutils
xml.sax.xmlreader xml.utils xmlrpc xmlrpc.client xmlrpc.server xxlimited zipapp zipfile zipfile._path
zipfile._path.glob zipimport zlib zoneinfo zoneinfo._common zoneinfo._tzpath"""

# typeshed's third-party stubs, every module pyright can resolve in them ("a.b/" for a directory without
# __init__.pyi), newline-separated, zlib-compressed, base64: regenerate with --dump-typeshed.
_STUB_MODULES = """eNqdvVm327aSBvruH8MTb2dwHtMnybnpm3TnJule3U9cEAlJsDiFILe2/OtvVWEghgIp91r2Fuv7iiAIYkah8O9y0ePw7t/pp/rX77/8Z3hdNe
OgFzEsOkIvkxozoG5a+Zqj8lUOSw5PaqhbsQiW6de3uhvH2zq9++3x5//3a3tyv1Ut3xo5LQritWH9Q//deRHiPMgmVtneI0Oqf/76y0//8RdH
/MGAP3Hgz7/89OuP9V//+/tPHPnrD/8K4Vc5L3IOYrLOegzkWXZSaOnlRfVSv/v98QsG2HVyDq+ruu4FpGUdgadVda0aLixYiUnxBF1QeDyPH0
wv89osPK+nTuhrxDVjP4lYvZWTHFoGqsQguodWmuNUP10hS6RxV3rsxCJbFqzqScyY/UKyU6dUrvqxXTt5mcV03eOKeuuiOp0jFca4iGNeaEWR
XZquXm4MfVfDh5cKcpGGLK6G81jS+ce7P35X+N+U6//BN8c/1f/Yn//X/opl7O2lyYznERLNABieuayXx4R5ioRW4cd+GEHO8zjby7fFX9DHH7
Va5Aa1oheXUJ56vUkhM7xC+izz2G3QLIZ2DkTZjHMbykFQupmlHLSAdApACe+nlkeAXMUUPPTtrN7CUN7UIGeIcoRMa/COb4vUVrzJh370rTwn
IhS4LoNmcVJNijaPWXVdjl/gXW4peJWnWd5T9AZl9AYFKcPHWYohRaGYqOE9i76w6AcW/TpFe6Ub2XVieKTMtJ46pa8+I22MnmSjRJZSi2yug2
oY4ipUir2dP36bYbcPL999laO2MEzzuIyNy2ZOijO4R01rFmOz/Hv1eWBD/04AU3HavDW39ul6naZxXiLBtWAx2I3NLUbWQb3VrO5rr2NiucLX
b6UtLG9iXa72cjx98lpWgOd349yLKUGpaoixdhZ3cepkjGL1kaOqaZo+hqDEjuvcyHd1cz6r+iSaGzYN9SeNkV/e1VSP2XpHqPGsOiid7qI6YT
PppVGH19DqXDd5kf2EVzlCF/CEMFyTWtMImYLBqpMaxPxgqQXrP44wLQT0B7r5a/tT/dt6PstZtn+N8NZ/LqDbO+qfY9+PAxE/i2YZ8XEZE9/y
MzwyRn7BmiqFoOvxKro/IXEt9Ouv73/AdvczVJQOkm+BoPRiHmc+lYV/F7PelIxEoU+zXFLiD2g1/wmZglLHEvDiinppCfEH1OqXQQXRYe7+c4
EOR/xqFMdIMPwf8g5V/hbafwVfAjoIj8u8+tvEEl5WP/z1H4kI0TirCwsGSWrxHyW8OtRo6rPA9/xP220tKW1RtNSfql+heh0zfIHOTYL9BTk4
hOgTlsIwJCV+Af7pDVrK5C7zKUthbt/zt7GNovKn7EFSTfIJkfoLWnToHwTxaM8iuKx+/PmHRPwzSy1HhKlieiShUP2oxGUYNUTkJ5QxW8tBJk
pHFGQpeMrlwVD+w0Kuk+F19c/rOtwihJLyL7j6TSzNlad+Fwvk2mGXpNu3iJIOlpa/xCUqDkQQwjNpjBHw7/NmqtJAqP7ndx6yFYeGfLJMD39R
5Yipup0EDU4nbX7cMGhEFJYXh7T0gb0EuS2QHoPooePkAT9ODCH4evAUbEscZhoFJ11lN+HQzAPD2kN+C4LVg5j0dQyeDO06hbjAh4Chi/2tzu
tAL1SbMYCDYRgDDTSBGzZg36CHnkV9ekB3h8qP5Wy7YSXb6a/NmAi7ItiSf2X+Qio/hkadH06EvxILnjDJwIDmlnrBHFFD4Oqs8Ptxmtg2181V
QLvcweD8ooaSHn5Yjmk6ha/4TLRwoFkOqIUB8oUGfSwtTSukSrdf5GLemKcn+LJ3GFdAA64LGqu+ypZeZJxt5V7bXmDhllm+whP3HqtH6vyy3D
PfZ9WUcYkK5kgMABUwjLp6n2ECoBINr2nzRpjBQnJZMENg79YV3EyFv/PUwY0wBFiYR55whEelKWVs5oFBHWZ7SCld1IHh+bAUaY4IJoxyctUw
Oq7bsTeVUcq38lU1cj9i0AAqGMxDRxOnJUoKDF56lcsq5lYJJtFtbZPCn8YTg0IxrjV1kniSQcf5Igab5xka8gP0phnC9fRryKavW04NNcaOS5
p5LcM4xoGeF0Nr2Z3pUfhtIFJ24JCpQZ+BgaH159MdSttNcgSWvvqEQ7QCWYKhxq/p61t+xpHkdllTIbSAHaXQtW0X4BpndewvTrj0tihuIlSI
0KS4UhXittsSo36OJMHXuQt1B1eAaTZIQq+/oebZIgoqYci9WzZJQWooalMmDxVcXTRNz6qO0ECq9lg7SYOi3nkWvYRm4VYHKse3zfICNd38ON
Z8/gUP36/9JIbLuJu2kUoFj9XP6B2+ulUfkXz/hEoVt6GmbnjmvmEcGvmMoq93bEs1PhH8yxMq/8eYv0BhbKdRDYt+RjnqVBzq/h/etNLqMoiu
8IBzJ/RtNx+FGjvZKFI7zEVGey8ThRpf8CWi2xoBQ6cn9J5N1+Cml2ON/1usX3brq0hxP+skql/+hvsZ57os09tuxgk17PAQ0+HpW8zH+UL9l+
f1o/Y11nMpuxtYohS8ooZxRTHrp7fZ1/zye16+7J6d19V/d2I3WwcKrgveqzc1HGu7MfLxk80QSJuAS+qLmDu5LPu9ilRrp9bKVLma69OoZSTg
nPg5KHcBVtWf7rIW3QUK/nLtd3SgywZDise0jDDwkM/o0aLkI9ZMKgvCPt1vMTCfm+++ef8NC4K25ol+hFE4y33LghCS5IlySN+xYBW9cH2TD1
4N+oF9L5dZNWUd6lYV2UJSfYerSFC8Fo78yIKVLEbiY2XzhC6z8JV32M9qKrJ6J+SxWcqRmrUok7QmzDDfsyBUCkL1muc+3fNk/PjVh+9YkF5I
tq0WPD3epjzSUWSTToXrCsT1hUWT0uO6A+fmm49ff1+A95v1RJdy375KMGdWUtmNZlq6EnYSOKxZZPn+nb5Bqhl8lYSivsKyzrKkwHwjz92hnE
9pCr0kYpWn0Ms2FRlg3Kd+wWd9+136UT0cTrVljQujuv/9N13uy21sMPdTZJPHmZnj3Ru4NElUClNt5RtUP3WqUcuB2izPkJuuwSTonq7NduN9
kHPt5mSfidQ2A8aQXHHY2FJx2DSyXnXG7xeXTdPM6brRYEkrLxgbZwsGH5dvvirAe7kO2IMkAI3y5wPyVXSqFfxrf/fVV98X4P3HkgbOoDdx1y
vQ+OblfQEul3hgPxTgrbteVGDqG8ftPhFbvPokxczWC6RRSmEid1P4m+/fF+C0EU7YnXxo+FKmAfalAO8G+u2Hbwtw1VzRkm24SFbh25cCjL3z
eUQjotJ3Q6ViBUCsXWjZSeKPX7//ugCXwyb2Lruuvg1QoXEa3758LMB+hYGv3EllJ6UNX/p8xJbj/e33XAn5/qtvPxbgcjYj9ugTkdJuSSeNUg
HZyN1v+P37r94X4Gfbb9JtlW5G4B8lhWKyE2vnhotv+vLVdwV4qy43BdU2kVA1Y9jfckj2gTyRRtYTaUckIao4Y6bs9XGag4nqjM87D6lG3AZ6
Ns21nsB1FTKLZagsKOYbRjD7mI3lCjVq8N82ZfzHgGHN2yxgUNneIsF+xBSxaxyNM6gp8MY+FjNJplC+tRWyp66kMXTKeNmrxbTTRapa26m2Aq
cWrE7vkPt6nehPrag7sQ7GAibTcB+uQEC1ehZrt9TWcqTGv8NlR3/t+0eNnc9FyZ1wSeNR5s+iES2O+y5mPb6kh9ORZXYYx6lGcxaJhaukdfgQ
vZ4OdZbrPBojz7IKRqS+oonpfKDFRndydkw5060XxeYAy1SyeanN9a6SfkKpE2geBp0zsqa/Hd9hp00zfqfkaYEVHpvRHOUMEsa9+9EeGO1FDh
RwRAKN2KiOwzKifFYRxBpX4ffUn3o4BlLb1ZgDrWnsDiL4xDs8HftFzGgrVH4omU4UvqXjfD2zp13KR2YzB27PUFjdrwNfoxo1u9WmTA/WfKyo
omFY0lxhtG0tD0tqf+u6l1qLC5b5btqJk0YrISr3sUrW9uBWCqHGExnLz3KXNNUFq5JXmgHhB2Ylvldt28m74J6PD6+Z7+Q4PtZHUQZ+6WQJ34
1QexKTemFwWt8t4Xa5o0Biq18k21OR2o2nUQmsn1INWlcswLtBmwVJXCbqoPboH8ca1d8r9fVSPfz8ZEhTIErfj9YMC3DpHrNbkYdL90yXj199
9VUJL96lH804XYrEwX0vZaZ45wM6j1zus8TOfXyqWKJ8H3TbRi5nOqZ05zaTV2JKd+7lt+OcFmiY0ciBArQfUIHgSFbv6dZ8/ZMo7LySWuSHIl
G6L38D+M+OHVzTc5JX8SrtT3VWb7QsYMV5HdDs3kp6kVPtDajMpptxHsYlvK7g5ZpbhDgjbuixQqfC/lTQb+nQhll7QOtaiwF687iXwILXpe++
gfJe66vqHQidgZuxvLXAhGb4kUoQ0NgtOGSxv8bMxLQbDmrlab2k0DQniGqWGJHQO5WJFuSNBHhrYgAtHxME93YlYeNKfIxcElklD1JZXHDTVo
yglW+MwIOvCXIa32IEyq1sY2jKboPStSbvpWXyMD2itWaCocVnCiUvQnvXEuiUyKpPNR5TgqxzZ4FZ4MSXlNtVJRrqztXrhLsa5roVqntAbqfN
gKHate7FQDsfArRtayxLCVCjUfxdPGJiRjv2DOF0e/lWy7eJaCpW8MmhYz63odLQzqNqoY/4yKhpwi76HsE81HOjHesH3LLMChJe1hdJcwkBFU
3TifbTqhcaxW4qJzHcapfMymzGtzb0ZnaRic3xPbhe/YX6bmtAeJ/zfhBAnYKgOiXCFPBXTFztMp2ZC+Vh7i6qm1c7MxXhOOSULfTsZ9zmseBH
mURXY4lZNW39uMh2/xaru/htXfEN2+JdPZntgzGpsuwWoNzLBGyY6k+ofEFotRkWhZq0JyCOvoW4cB1VDMfZajE3t1I3s5pwLiAAlT6tkH5Jjg
/hupULWpVHLOVTBuKeq/S0RpWORWzAusxU8lXBd252bq5s3rKjyB1Fm6Ou0JLgJthcsRj1PLnbsTG7rNapG0VbZphA5TCrBnf9+G+WlF85vKp5
HJJPQpPqtHSjMxTq2bXLlCO9dR4nWYe1TMhu86McmGwQqs2WyKLmVpvuKG710Y5SVMXsKdpUrrExxaZmR5XG9UUm2MFzFEilBloawtSfAJSHNz
wROxemX7l8RtkbxewpQ3+2PsN3b/eUbPvyTDqaBa0jDVxuXAfxCiUQu0J76uj9Ajcj2K8NF9i9hHICLdw0j+16+FWWccQuzsPvoNtTXgfooJhG
Z09rusw4x44hqpnXpeasxt289d/rGNV0DMvVCIyW8Q2yrwNVX1L7cFp5n+EsGgWDMdz3yNTBnoWKJWdpJU1Sr42quWDHqemAxrrT9e8uR6CKW3
tdwmnOu4cgW5HWSQW9ID6m78fcQgmqiwR0pDqaynW92vQDJOrQxJMJV9ruPncbTX77ONsltMN73bOS9Hn6vifj2ENna4ExcC162xvdVYe3gLBx
mfQJzcm8tpTP6q7YH9RYiajjmFwh5kdKMNaepi/40CZXP/+hzda6Al7+hnlZjm+M87c+1IvDZ9QhQflwDFGMaXCHgu5EqUuhWp13m2BMcsK65Y
EzHudQPSoQJbzGdYlOLtFQgC1KRzxTCcd60DZgdV/kzyvWOkV6ljhLtaOAHysge5qQQdvEdNjiBkQMxKR6Svkxel6RZ6pfECyTfF6FoxZRnAWI
yXQI2o8tNxRLaqiAIesWjCa+dGD+k2qE1p8pl7/BJJobLlHlqTiJixqoIQ0cT3B01kWHYeuCBqnMB/aZbGuJGTZoeZPc5DQgba9jWyTiAYhtvn
EIvohkRJLcxyVQpGD2VO7Tx6FkA3vbJuT5Myb4kFHhKmeZo1uhtS6kDjW4J3RiSEROax4xZ5ohmxk0pO0FVLdSvUbvzUTMx4TNdsZHxNYpsgnK
fNlZ6Vs6/tSi1ys0kMz8W1aja+x9zREwibqFurPBiYOT4qqTog6TYlri8qXxaIIrB7Ve+17Mz6hwofmRkh2chJyZHzB+2QJ4PXFlFM1daDolTv
kQZqqLiGaiF9J5WkdsKbZU9Z3XLq9xlngUgGI6sodWO9UI57KsAcKuDvTMT3LOVHZaF+KpTsjugrfrR7Jliwnsv+XJh07SoJKuye+ApC5pyOJU
okiLSoDa1kQX2PxrhiwTm4CFkQXEZ5H9EX8QDhRsJe8FMsswIQl5JZpizkeFpH2OCvM6kEFiXWxQklDLDPNeqUZh2nVP7QtDzVOIVh1jMXDwmx
K0WTBFsdHE6ZK8uSIaJxlmhaknsidd0DVY0robwnTF3QahhE1msAjjH/7Wd3XyitaamZtJSSm+bTFFMv/gBrcOUtImxa/ZbojS5U7hXZ5w7w10
FBYuS3A0kxWcmq0wysx273rB/RTvaKV1GUco7dslrWyGMnoABXnC9gTuOZ8V/SGnyHRhnVDWjWnjCSPvlONEls4GIJ8ooYb9liSYb0SX8B/NXn
BSzADkxpOuyCrSXE63i100J5EGb5PqXHi4sjlR9GscJhEGX+6C9U8zPWIA8qcDrL8o67VL+wtjBLRJuJfFS1iS0OvZhrSn7TqYdPYYlQjVZIDJ
8xkK39GszG5Uh7MRQYiBvyoGo9QXQ6t3SbQmQIct4ZsExkQem3FhGzKaB7wDnAzhom5nFoK4uJybArTW6cpFRsZp5dAOOpU5ykTDrDR70b+4fJ
3pafRbkWtvL7iOpQNm6hZut5mtFGTVAHVac3M9ifoCaTZZrBsv25WxV99EN+9hEH2VXRdeV3XTtwlgjBhDLAjTAIFFjIUnRYYjRoLU2a6iDOtB
1xFnsQoiBeVMNkXSlGaGVJCAbwVmghoTimPXhg+F/7WRbF2CnnfR37S7qHAlNZaWkbzibqBC2xNoBrTcsETljq4LMNIIQD/TXwTho0QXOpRnuU
l6eXQyYDFIGCkHodlsCEWwWWbEBz1SL38Nryt7XWeEsU1hoAqv6xNZVesiDwMIshYv8ZNoyRFWiacXjFjs3ukccbWM6R7mNFTTcoaUKfHeO2SB
19K24UWF9UQxzmhCyfH6QNVnSpnXRWuKiIJircxD849inLrV7ttuhPGxHkM+4lkwfkuWLsBmc3KBm+UFixZPrnFe8z0Xe9oCrXAE15WYQQ3954
XgSaBD8RBpsP5qIshUmAlQnaHqhCHsLMm7eSPQuuOhcz3yhq+gF7Uk3MN0zCIQg4pjmD0mYi+QROOcvpX1Eh9BIyZcEj+ouuDWuoHYdTGhO/Ks
GmNjJH9au/S5BoLHRGgvHokelGhbhWwYmu+l4RWSzmZKaK3Ix7O7qCKE2qiZnJK7X/0OPwi06u63CmRpO3PbJZoP4mT6rFmwuqpP0a0pVe+EWH
0SHWTlPY67HU21Q9n4qezEcFntrKcdBTyjVJ2FXmgO/ilthIz0vD5BvaBlnPAuKlGJ7G/QZj4gpmUqM8lDrgYGmkTnFfwTWLCyvqxxzorlcdmn
EKBZNJA8tw3XQj6Pnh30ZkjFflfLFW+i1RP2ThwEf8YFuDwKjopSyJS3FEAbygn1c4ZG2XqCbkbA1clHJ5mmBCFzGEUaAbsL6hf2NuYGcFW8R4
x57CYHLxTIVV3AoUpLmVni4RavEoZpNrYGpn1DXlw+h9d5TAFLVKAzFsqRuKUviZj+vgRECMSOzt1518KY1PeI4eq8atm+9V1wWf1kZlrJz3cA
NyXcvsKGSHTyTc+Tc4bPZt9fAHfJ86GXqNqxD6Fp7boE0uItFOH/PDXvvG/RNrjEnbMw7gpZsylah4iermqAMNV8xXOJ7C+aSMK1M032V1VtFq
7wQQGmXxs/Gt9wLFaQNcxEzQZzqjjGCSTTccyR6oRQCa/nqec4kwV4HEcWpyJJlX2Bmx4MpcwZQ2XGluoizcfGsWaWXDMaOk8YHCPGACa6rv5p
+pA81TwuVNZY0hrf8SRmggKFh7AUqM9jIbx/cHAEUky5zAS5O81zSepkL4JjkcHUlR7D6b4uvg/q6Huooh/azkltGL4sF6skRr5u9ggkRXCf8U
AKcaCN5LHov26KYncnw+ycb0IEY/6EsQPwDGVjYn9lFhnyzOw9Au+zbj5RH6gV4sBr5VGydVkM4rJDBt5Ve0Ef1i3OIM32p7LzD1bCydDt0tUy
G2CnuEPEZpUIwfMbtkcgaLwLhAhOtNTJ8xSdERYAg1xMSm+Q3ZsdIFrCcHSJEbNcGEJ3GPuFwOvYrf2mglOh9jp+ySCzecB0mCMxTDoHxWkToN
H9gW1DDjGPD0hX5HMGraYlR9j8Yoj4fus4IZIq52k9Q803Tgn6gilov2IGk3V0jLlt/zHql9Rj2Hx4naH08TM4zAAWM3nAay7b29PyGu3JSQFq
aHDSVrRiWrZcvikMk5okWiYXKDuFm5FaX/m7qPYNmbDIGkMy0/qFSP6JDB6XRINdpeiWq9lRFxHplzNomsIWDRM4ymamKYgqE781PSggrqHzk7
wRfh562osYgbj1zG6wjwlMtySAaR7fHjEUf4mtSfN3+gaNRForo8FCBmTlNKDc8CLFTeM5Nv6JtufpDvb0SGPLsmvWydVBcMcZpzbw/DSPqHG7
Dga8GVSJM4vOHNoIFmXDbVndVnKoHFh0ZFH2aWf2aWfFouy7XToOvbLxVQuHfmLjcONR9t06NtzulUMHNr4Tjy71iX3peeVQfWNRNhorq/v5Wj
dDgVjuG+EbAFtAqZzkgB2W9mK+1c4paKbjgJpGoCk7rB2DGlvZo5BnvbBgZWyiYDCoj/hKtD1OS5qe6YHuaWwfh0q4X/lQaWuMd9XwzM5DJTSA
PA5qlniw4dA88VTabFtQY6oslo6qr4LGfKQRVmsFjcN4tIdhhFUfrxFWgwWN8VDjMKbnw5iG1WZB4zBNL92RxvUwPdRypPHp8F1uxxqHadodxi
OsonmN4TA9pmONuBrnlcIqndcIq/eCxuHrrIdhJE1AUSlsDkIlcygUS6EtZYmjSmXrbxkFM02pMwDbDNqdnxGTnHIQu3et6MYhuIHi0ovmqkLU
2OaNc685rPKLtDxNvTm7VMvxcXUdEEkVHTJy4gmuvg5oGHhgD1h0LGuOV63F+rbRSV/W9mjnsRdDTWcqipxG66pauKNoExIdR3AYnj8t317wMm
wJAwX88xK3kwkruukqTnJ5gfdsrmIuKvZdLc2MuWZ1tpjUxgCgqLX3JMu9gF7KT2g2sFpn31cxZ9HQ0IdZaAdhRq0zZJir7EPGfLocqGpMsNqN
JmOO72I5Fm/8utH6PU99g+7UHpduXHLefErmiZBrJjsjFBNxf86hY3uux3YpEjAEhIJgbFnKOg9yi6g3e4lMFYpTHWcsz2i5tiObPvqbwj1vEj
84mmTjtKnAvRjw/PlhT4uSE3w787fCmXQBw93Ryo1xSWkEPLUErhf8PHS66XZZqaGZpTFrranKCzinfibvh2j34K+Mkx299iHkZnNDiIbxITAH
4eHTu5XG0SH2yXg63CB7QnwUtHcDtEF3fVEgzj2t7ZwV9s/PnbjJj/bHG5NZEWfmtssKzxBtHg6hN8RHGtHbzDvZenytzUGCFg3mmS1icwsucW
dIhaeZt+Mdjy3sxplRoPKWwzYyjiEjvuA6sisMcVznCmXyOxQhYxx7XqzEBU1LaHkxYdwXj1FjjJkpG69JYr74B7hZvliEnidtT0nQ6UFuFMhC
K6MIyAIy7nSCoNxGHgdQVkKfn3pDIPz6sqrWP8W0ZVZ4VWMXpnSN01nL9hI1lGtzIrBHIGMyqCbHx+dHKgczSCljjsJk0UrQWZG4U2ZH4TSOXT
1OOxroJWuPxlVXyI57KljmZrmjgS6GdujzuMeq8y4JYe/wfi/Ojg5VMkV2RYuQ/SS8K+ippHSYh3CpBe3XzVHQhOLheDjTuV3aunOTtyX+ANyW
9gzYKzyeyt1npjXVmIjkYEtP6JMzIciZg132OE/tmf5U8EWGxVifo8szbVB3bLARhmFcRACcVKvMlVuOp0gSMIs71Y8oQJ8T92d40rgYMJdmUY
KuMQbu0seL9ltA0aVdVdJg1LTSFU160Io0brhs0NxfhwzWRj4atJPnBD382yYL5xDFQOO6IOoF3EdO185bqhGgJ20f430Ak2RKJl256JgW2GCv
NiL6AW3zm7mmQYy9tM4znfS2kGM8F7fN35J9NnYhsTftcjthOM18aU/4v/oZVxR/9FnKQ78sckNaMbnfihLHnDHgoe0Smkc8MaPHCDtMvopuxT
hvAHWcnUiLmpsI2dRdGqfem2i3A2+6vezRGZAXx5ZqRicPuKzmhEmseosDtOJToGn9+3vRGoV7GbpSyzqFcvA+uHFNtJs2Ln+YtROHvIoZ8oMR
txQyzwtSA0ZymBVr0z6HiOlthMh4+kS9NMQmaFCoq2EENNKlS7MuhFfrcDdtKQpvdiPYRY4TDmH1dlU5n40BslU4AQj1K9VZG2R2bWNJDbB5Fo
9Apn7NJkIgHdZuGwJXWFIpS8Qw+vKXYdiYTwKhqkGC5433GGYgk24hgh5HNwAiZXpuG6SNQf8GuL0dAUIbjhK5gppyvDsbtZyGOnbKQJDtOc0p
c1XdSc5QNa+QXTMW+6VdlN4G15+guGaoqQbMDlTzU9XihCcSNAvuaLxRreMYny2MiLulgmsomuMUAXfryN1jkOaQZaGLb23KHHFBy/EOvWvPql
dm9txx1/VkfK1ECKOIbsa2t4B6fYsMzbOPW0RMYTWJaxFTSqwUJAv00wWZDltRzJseGnO04xYu5mxXiRgkSllXyK20DRcssiWPQ1y6OBne3F3C
oE++RgJ1Ehqq7TI0+FQGTT4NgOtrJERf0yDpPeFHoY1s9hpSG8/diyQab1lk9G88QSb01w8aw1mJPHo6AVf6uyBVnRx9DA/SwevBt/VEw6q3g5
4eUBUOGWNySQrXXCh1rGv2PcSSqRQtEOYRc3aul8zqs5P0RqwnO2JxiHlmmIZkdBtcQ8/EiWGWpu1ABhjHC4z263U6Vd7/XgD+wwlNN65tNWCH
IQEqs2OfwY0X/xw33TDIlmTps8cbr8m5Br2GyaAZ54atORPuHs9YyDUnYx+TUbYPnOPWZicjrI1VsL8wUwlLf8pdICqiKyUfFa0U9Lv3cob2le
awvkBuYtIPJ+QK9xS+BjnRzWH4hrdOcowZ/mSwM6sICZ//8AS98bSeUxkGGw8Oq6fTS45PisX97FWJsHMI7M2BT84yRXnadHzKOvuh16agp7xz
3loi2FBhALHwSUQmkXWPA0GOpo2DVFsVCEpjHOeaiUU2al7XmZAXFQJzpaIO9kx3A4FR5ZHC2lMHwC/3l1XdELvGLSFlvS0Zyzru0Ay0vMXN0G
VN0z7VOBtsvFjY6cijG5IKPddzm+dhXNLBiG4nREoeOy26o7adgOV6VEVNBfW73eCZKpEBV4ErvZNLzbNoyDdsytMFj9alfGhYjE2BCqt/T1Fi
NmzOn9eBdsAkVZ3nnbvNnSC8zyDjBI0rpGZOgace/WnsyrURhUkFhjpQHFv4Lvhe0BL0U5lhY0QZiyOc4xJrpJ3RQffFg+4Q1CBAaEF8J9pebO
MNgKaG/uCpL+Yi9PZRuaFRSvyDoNrusP8cS9Xr+wyAYRWewsbg9pvPOVUM3TPmPffY2r9hbew5w2sfUS9WrJJFt6dxTPCkMPvGMtxC66slPEom
jja5tsCaQrkRNdsAF24+jnSgsiXFoVqQLsbhU3gdva+FQk2aupsHf+EHqk6G/B4JdnYlRCbaCpcp4mgrBueTGeh6gMZjoQQDwTNOFg8JbI0rEn
Cm4466BF4Hu0Msge/50zbPFh53UxBeXrpIoGWuFKAiHGJQQNqOGrIQzSOMqBusOczOy3lRzcsjEeOvYqE0dQ2cxs6gdrY7QfP4GRwyi76m4NK9
ppB1A+LR9Ckw7rhcqN53CLkhiSRjiBhDaTjm9CzXTkdomlEIzHMEwXGGQOglEbeTLwdXcmO+zHBxfnG+s1PY2pJ7dHPbyGFmQNRu1KRaM9vogF
naDcMe0TR94qUHlNg+CME0dl6KU4bE7IUMmn0FA6efweQMnQFJbRKiruJKuUtca3jYtaQZ4WZOcgIk0Y45wz/Y/C7QAbm2J6wFzI85Gc0JxqEe
TgZfB33HLYjujB9/UdXqiqYnfRdC5EjYZIMN3TziBNisZCLaVisBp0eAmCGxl7dVXw+5HWEpUDl7JdWIzp+RwujFcXCosbiorQtXQZvJMqUOF3
oy1Ey0QPMvLszjtjOQMup+hZrQLDl6ji5stvQgTveLLg4El8nsJhvNo+haSl9VgcRtxRFjO/+aR5NkiyjcsMwzkhbzdri6i/IXQnfR3bJoWJCJ
hWOySDiCiUNElaOwJSCddvfiL8yGOC9Bp5VyqBWNnzMvqlm9oAeN66to6E+1fTaSJuUvKGDrmlDzKLapaP9ZYu/F+z7jmWI8h29QoC7NVGLUgv
PwPIknAvHMbT3ByFdS2WQVOlxhLVBknVT3Z1FQoAO/C9RtKd01i1atpegYP848h4dqo6frjba77mrjdq5MkKXAq7SuY3GgXta87wUTf9WUJrd1
XZn3o4GiRvT9U5KWmtApXFHj9rrH1TDw2qVfynScTVJ2uqkyOYsTdEL7v8saGjqSRdJb+R6oqKAImK5Mbbc9l3DIXW35LlvtFMhGTMYjvYqyXa
xkh7UlGn2mFUmccC9xnem47tBRHotZ4/i8xG52OSWNaexUs/fWpFCOPFoGiyI7i3M5chrSs0xGYt2rNzUUlWnKBgcdXuGVvAriPHJcQjcc/Xlc
trrjrl3/CcWg7xSJcQMSwPdcc6tcNtCO1BLUVxMbFFcOGx6VjWD9h+TgBaBuUKe+bk/2p26Wt3fKOYHarqDnJ3A3QQBA9y8QcXk2lHAdUmuauN
5gY2MVyNSKbzL5UYll7KOlQG0sHwIYV5c20bkPYqAKz+V5RdQcWkQOiNCL9fOqzlE2cwfEAw8gm1nusXzm8OWzanmce6XKGfIuYw1pAGNNRse7
7gm4JMXcpLCxBLTGNbGEWwZVouGdD5osFHOtbCCTkN+ihAkyYEzY+dYEpEnfAmrGg2WVFDNHIzZ4hI7ZgxPTVF+k4MjGdfPcmeG0QBKjZqE9RZ
01HQ1jylQVUTWn3U81riDTFsWY4j6N87wBbQ/NDiiNPWL6653rWAn/NpgzSCQzUqtvbQAkOfCxxp+foGZ990kON0xF++uNq53sMtunm8b/1cn+
Onk+Ny8fv//orr97+f6FrvU61NaJNoo0MfGJGipoXt0FWr5ugrW793KQ8zzmPGAGUCffoNR60dY7Xn5Vmkx6Po3QRuCfzbVKJOEM6/A+wahhiS
HzUmRF+vDdlVhFNq0WBW4wZSwG51R9a5tIDFMC5U936S5u7sJTi7kwWQnXpGj/jgguK7c2E0LQe7mPc6sj0I4nWM5MMCcINtAhlMaCpl0DMXyz
DXUTmBEYOAL9dHdZy14432Ne/nQXoSBD4RYKOhSWTXD5/ibON2H+2ko1uIZBSrcdJRISthMQQTQjzasP8o6mxYu1xk2pZYRybVFMQH8VRcnLFW
6YwTnkAm6NBU4yV7D+Wgr47o3k/ts4edZHPASEZzs9ofbc8+jM6KeU6vF81lidpsrdeMHBZpkoR4Y+jy7A9hi4EltICM/uPjJ9be+EfYPMaYoh
hH0iMyfroCizjNAV8NfDsF1GIVuxOktj6pfAxtV3AmZnmvjXGo07V6ymM6Qy+1PG7ctwXOWMUXeVZjwvcV8DT82cx9NWqFg13PxzezyhUvlSXf
fjq90E+sRtGncg4ekmy1Pa9FM7nLmFGrIczj7rRsFIeF5OkHUZzi8w5VR0Vo6h7YqDEc4rbmKwQi+XeSs5VjI7nPHwUswjCYeDktpv0Io5kmoj
JVQP4+t1JhvlEsE9zfw6c2aWw9E3y2geLUXejLFjjImRsaFjsEq8XljcuIjmGDod+YKjNo7txVtdigB65iyTk4TmDUa2WWKnNP8i81YxxIQmz0
Vt+cEaOrbjzFLLiGeyGMYXSf8RAsRvm7RMXH06Mc7GHg07Cx50F9b8NWHNfh88Y2Xt1y6oAr2GPXYrQcPzftzOSa8SFk4npjXkhretaxRxZLq8
DZzG1jspKm09kQ2cFANtOxwS7jSPNzSc3lHBjp7K3gGnj5g4UeuUgQqPacmanI2ftyLtwbBB8yDOBtb+86o25Zn+hufcgmsGW/vcBDehYL+9Nl
OJNVQj+bvZwU+KmiimsBa6q4NDwXgFNIHQV3HLWbIeS1H4CvaVa/5TmWGDAU3mj4QKRo3Nh5cmBsUpAdyZIkaMw3OrICxnNoHxHA1SDYKvHlwG
ESDxovWWtQnp9S0U6XTJEJg64YsHAdBK+prXAHoLcVvPTIG0GKNBgP7GG6RakD6Ne7vgtfyoRj5OI57D5C7QCH8YB5xkoiZNB4w7qGdD3JU9km
4j+nHFs9FjlMB3uBzxwfzd3iEWaV7yR3nmYFqtTolmnbHCT1Dyf5CCZr/MFjhtlN0uQwuQAA2GpwGKBtY40A2guY1V3MRSAFn7oADxc50h1kU3
rVRJGIBmbtpIgIa4mUc9npcCjHX3b5JO6ftr/JcZmxU0YYzzJ44KCjR5uX78Dn1MnAooadEZDGimvPxpvMoX9GaJ3WEbs5/nsd+P2zrgXp0f7E
FkkdIA4XQdhx2+u1Uja2XDW/WrKqjC5V/B5hBO5SKXf4MW5keexSbhD0mOF/gnDL3Q/5LLfznfOXyCB8p/Pqu8jUSogNTFtHzu43hdeplfcMqa
42kzbDHNxknabQkRbJwlpe/h0Op3KBMtl782jd1s6NX28rRXul/HH/pfLJlG2MtQ04A+h7dthsHwMgedC4QUtzMEKWyiKfNwzEsV4B/zCOowhT
Z4HYJY+j5lLNK+i3n0VVaI41krKey94ugy85xSkkM4lWC+MFFKK01PRHXJ1vdS2WMK1ZzncVb82++/5eCPX3/PwB+++vaFgb/+5v17Hua1X75L
YerIMBhU9xepl9/ab1jWnUTFktBHh5ph1CxpOjocw0aF5nZ1AYbC8/LV+5c/Xkp8qz98/L5ESmjRPn78uEd///7rEq07MbUvjsZexCIvj0Q0hq
V/Gns/jrrO4wDdn5Sj6ZgE66B8/u6GmwnXY+unt9Y5Iv6NCQzxPxl9dAwPFTLNhGQUdDYYXIuz/KN8G9Lck4LYmkWA4LqipZYQaNSPyvcHI/fO
CfQaAe0QiejTydeI1n3sGAcxLF0fAbTUltUVznnfNEcA9M5ooYZWXEMCDdiM7LrYHTp9oWOHunUS9KfqVvHN++3yZbv8sF1+7S8/qeXlq0iyN/
tnfDbugd71H9aP9IcMke3iA8l2kdRc03ZNurQDRXPtKneSbNg1+ct2YWdobbwKBSducgdtcudr2uVqjjLrnu/QoW473gd/sTm1DhG0RA0Q2s3t
XisGnf8mvRHU/feSXxPVHAZN+2nmCe+Yl6dh3EK79lgWZ9qvaI/ERgRHuOV74XIWLHNGf4w4v9HywZ7HcRnI0R/H2pEzRnxXQfYs27c1fCbyps
PS8MlYYuheCimsxWA2PvLRIceFD5ayHoJZamxY/K5uCn1ZBHfhu6SZSg3o0sc68Al0p1EvXF5Dv4EMvI3pA5B8KRmDjw2bJRsAjeuh6ExkFtD3
xmDqHVb99KdyNZU2oiEe06MO8vsAw37o35ifSnR4FuBy7R1gj62WTrbOYKw00DnbdAB7qrhZXCDQSXHGCZPgGjsgijwK4uk6MWG85j0i1F2/G3
CKrJ3dLy2I+mtjQrCJA84cpDIuUgBUaxi6kI/GjYdawQlyVeF1paTcyLPbcOQANQWXtDM/lBXUdqE8oNORQIbO2/vvobMRQDRp6GTf/UgBjNnX
H1n4269zWE2vPPotouos6IOZYxve/IVf2feAzyeaw4wF3ZvqzUjpUAM/4d+rfEqR1iqxAWpGeT6jWeOwPHOjnd55RXu7Y/UWi8dzmtbrZm1Wkq
R+5p4Rz7+lDdVaPhP7W+D091jbt9zPqL416zMxwDPS5DPpAZ8H9+HTnoJjbciBMOKihBBQW0M34KmbpLyrdrk+oYujUPlWU33Cq2Oliv4Hyjkj
1HgiIyXqszkPsFQOIm3qrF2eUBykulxPuFtVXoopHd0xCbRt4PWgREGVDYM9jj4pM3Ek91kc0qjmQAfX/WZo8wpJFyham4QDLfyqpQTb1GR7Ma
eWHajRhIoxET+Kn23txkKSborYnTDeqbU60t0tt5HarN4OlKAMfLLT2fuKs2xXeOuhOXplPUF4cymT4Ho9nnrKkjNaMBbefh5F2wjjHo1TOMgy
G12dgJZywNNbv0CVvHsWKuHgjqYbtXwmaOgMzWhhc+7Ge/0FUSrd92z8wtufjqypPWogDzWVnuyg80ATaiY5vBrvzAeqFNmd7ByomvXXA6WrmH
E81hzp3cTy+UinE1MnGiUO3xdtk4900ORh3GkFAtVZinIlEOhpPCOsrY2v0CPd9UT2qs986GUe0T3qkdrriK4CsG4rBXkVOO/AUxDrQkWy0xPc
axPINXYx1SxJmwJoWFg/p4+Fo30cKfc97jC27UY5PYxeqRpzLM0aQileVXug6GpmM4rbVT2qQzdFd2Xtdve1WzxXHY2Z99Vue9/Ua3XiJDs0pp
jEZaegbPoSt88cKZHnwSOd9RVnrA+01ps8Sg9yKCtmTD7oVx8o/73ufpC93v5G0wwTrquVM6fTPCnbc5XtkerTilr2z4eKBw8Ml+5RP33HXYrb
E/oH/fFQ4Uu11+IXCLSgaUSXqUuN2w2e0MfuaC3Wy+b37LlbbofZIrjjC5XhReUzmnoZ5XwXl6FYDwfKe3XIXKoPdnr05c/xaLpC6UQT2knM5X
RuBf+w58b1XmuWFyz7vBIN9/FkjjJbLMJukgN3de/FRK5d4ZtgL6tIQM/9cRtfb2PXj0CMr2VN3D/bwHfVUKeWYkuKLdrFfS62hKQjcea81Tcx
T2Wly0i2Wte1rAIV7f77QeI2Y2HsRwrukFLaLPVW1kMf7fA7rfpaVtJXtO2FPGGKNyQT7Xcq6peLiOmw4YJWKa2tI/tCA3dV0D+bmytfzV0fOC
hjKaVH8hlf4OCLwFN1f8TDdY9b347VzPXTiq/nl0NdGklfZYdDlkNl3Lw3YvfoCx5AfjG+JDUg0Gl6Rgs9JuAmN1b3eDYh0oBMsOhiOYxV8aSk
3Q49qUMhQAv8UmUKWVqawzygdNdY5eniHMnubAeU2uJ9RJmpfFGOSl9IoH4szWHgeaLmqBJ1dufi8HpDPaOtT18cYhsrmtIbeLbCrZv7Gic1lK
ZVNiVj37scaK3FkEDljM59qEbhNTrIKHPtDuEoq5T6VegteICWThSqu1k2Cte4Svfvta+zaq4wODyxpKuRd3pnsQrOhxYelCjiIoF8RtEZ0D6h
ug53nNot9XYT7X1d1auu/EVMg7eXLD1kT0C7QvB2ow3L0TEpZ1Wqft1hJqK7jqWem177fjtMhdW4C75Kxb3OkFKFiJNj1VZOaD1XWDtaxnVGK+
gSjasWdLDhLludJK6akH3YgSLuzV6uNR1HVj91C7zAl92AY4jTWT+h1Ra1CisNSMA7QH1/pbOqijrWXWyRRxfN0BibQ2l21J7qm5Nqr5cy6Y0d
dwLArQGXYS9CCk9z4ahXXN4uFb/XES3DFMuhey0+yLuS0dCLmqvw/S1AI6xXJe8M1aqknneE8xyXE3bTfc4UQiK48Ph+7RZVjAOxBc7snEuDtZ
amKZDNK2dtlwWqTjzGcA3U4cNbLZKYBBSdOsky06MdlwLTiaCV8psLNohbV9qwSiyQFCxj+i0NzxlvBYUb83nJgLULBFr+zdPknCtsf0Jy3c4X
5Hh5GXn8DU+ekYUkuMgxbXgC9gpDfRgxJp8tUDBuxSXugK53UoXUdLqAliq8im7nUWZS6CAF0ROjCmcGQg4PDuOI/tEo2embYlncxuPGFA2dFs
a/o+nD1nZavfARrdJOUlE3gWegOycKlF1MNAHjtrYL/6owfmiuuDzIf2+9tuNtZSlq5u05UCxfTJi0Su/E54c/dm9DoWceDpWMjJW1hKZQNfxU
o9NaljmtoCx1kstVXmFkocRQUKFEK3B+3arAb5PUBQXzadZgSIudEzpuloEq0X6K19Y3Kl9337iLfDuzeN+xML7xt0WGv4lOB0jKJ8fiO4hGRk
vgrF7zWEbdiEke6NFIEsfLB3pxh2pT6WQrOJwaRzp0cCfVp5cLC4tPko0P9dUlm7Z0akGA0xrNBiSTV8YQ2jvXSXDnWSSB/XFxGXOVYsrAHnc5
trU59Cnl8GTzBLPVl0Z3zdEErKWbPoWgLcQzJXDrizHS64Uz11vI1BFKDrpYog2e6A7YXTgXNF6mi/epjKZ+3+AekAKOW8zs2c2HGvYUPeNe+B
l1wEc/pDrWp10Kx2rTLK2LhBWbkeMbrPfsp+PtXeYcq5LrLjomcxy6R/kG45KiRJMvO0md4ZKKewe/c6Co6aNU1DAFKWZfUhm1v/0uyzget65d
9BHvSmgdnv98fE+WE3IlZzz+BeH240l18otucUeffMk9d3l6Sr9U9hiN3cLE6e8m4aamcEMdtcFPKHtvAcequ4WUu6FQ6HjV1/HZlK24Qh/ocQ
Vzo6HdRI+O5ELgCZ34I5lNEc/ctvutQkXrTqmBJMXlHtE9Fy0637lRy1PKszzjdFa9n3DxHfbwn/EOndp6svtbn4pmserbVI6qvk2TolwOiK33
kP347cvHEr5Xz4U8dC2wniiq7Zb1WMMGVR8W+eS24zJnbijmeaIP8nyq4yJbyuykv/cJJzmoNpXdyn4JN0v6eySb4Htq5eTbvQsX0MiB6r7+5t
hhV49P/H3F/Vrn4N6k6jnQRrNMc9jqF0TPLv4+rc/UVgd3lKos5rbDnBirpzWKc9XqAeigu7AgHU+fzPhvbE/Nu7GTtFPK/lZehudMj7fOX9AB
xtb/psca3BkeSVVNw6Q5QRlFHFLZDmmMq+ZqzoaL8QS6ijkVq/pDm0GsooCHF5g3pVPsJGZe+bSeyHCS4+ivcUGeMNg5qV0/IqH8kVtZJKhCrC
EqKWEGoBlI87cpKi/oLCVFcfDMvgPuqpPZAyfVmJ57ChdCmdTrmIPduOBXyHA8iB13AC20apKwM/TsCt/CnoKUoWc50yg3IXRDWxX5sOwMGYv6
MxJT9iom5p5lbG6Fh6wzbi3jSSazV4tauuw9Fni7liZFE2KdcD8kZpg0Uvoq5cJhh/QKr9OzFNqoynnJU83Ti504Zun11Cl9ZTm/U4gjzbrHxo
y9cSaZIbb5YQh7UaevnfBcmPTJ8/rObLdMZHKWlWLDSt5kMtzZLqS4hjLRySVKDMvQlvcgJLYmCUDbpnKMPzeWp7GX0PHUduoCT0ObJlue87NR
BZa2BRtXDLwG1Cfhm9qFrRQwduyaw6lBDbOIo4phyfNZhl/J4dCAdjlqF2keDGOM1nJC9ejoKoPj4u7QrFr2BFM2HZeXLsfoCWtUKhV1MQXias
qhb22Qitb5THT7hh3R6FEhJtZOZEC1nSWWU+hmiYz3PAU59CYu0SM9ZPvsDJ5UfhvjnQ4xHC2JnaMSsZG9GPBEyIXj3IdBt1scj9Ozp3G8BVzc
zJJYmWPQE9AeUpCg1u9ggi5xkUtbWSO7L68zIqksLJrVVhbPX0ovjy7Mt0auoC64DGSKkjIn2vyT34EniC24+SYlsG9Z03VOJXWFhVt1pk4Fzh
lkJJb9/JbzGLUgFsXqsq0Lr5i1DRbnmtKNentkKP3EXzFkknbPUslnt5MSkWj2N9bW9FGEFZtd3Yj6/HZpA/q+xpdoTkhcnUxxadaWUjQYqcaM
LfYZrqCEvkFq0wpRxmWdROsGh0lrvyISftA84zokHw95prmqrmXwFkZgA0R1iJLJ084LlVlMO+A3n1U7ikwn2Ss5MxfjLp5R4FqXkMwS0JPkp8
ScBZKTSc/O43d54lA2/ZOs7aGqZsaeCZt+MUvRxyzfyX1r23fGasa4Wi+xd3KFzLHOoRzLwbiLf2LSYG0MFkI7HZB9GauBJ3XruHwFbNod2Cg3
bZczzpCKo9JmfaOuxq8vOujh3/L6gNyXlwRD9nLm03vsWHgSlyKO5ojsQ7J+V0AVBrOhBl96ysOmjaUugmw5SjcS7Y5HlnPFjiOTen8jmPJoCK
6gpaWA5LQvYNHlKsNqDo/VDIWq9qfb1LgPCncW61iDmZdCeDsVB2G0i3d51l5XrvMayJWvjhwIg00yaWcwcttNjlJZVkPZlAzfjckj0AcRXts0
y2Fr8e53go5FRawq0tcK6OMA6HzyAochPxEH5lXCLawhTkmUI955e5HRO5RxMmgzf0ElzjNlJXzlV7H/OHs4846GO4w5UkkTOst5Nh1p8UndRn
8BzQxkh0ltADwFIrCJeNqoPaU9Qb3PJA+fQp3TSl3btp4UfBcPNxDYAGV3A4wzvU02Zh6hDMNHKDUBQo4LvUzHQeHhkBvSvnzzzfvvI4ymor10
HfUCdBDqDd3YrPOrpFtjHJ5wrQfs7kXwRb4lAHZs3n/Ngd9uoHNN7wEciskg7DjFpug1oB1A7+GBjB11L85JSlin2Jt8XqZYImd0CZR+EwLjBC
TIZIwE5B5Z6yCLaX2tN9tcD9PomhwUeog8sHkJsmqNmRrPRo1AbFOFia9W6KECPYKGQtjJT3DKWzmBx3ZA4xaDaHeW6JnRDK4ATw/7Ez+MENyl
JZ1gXkrKuwRITh+xJoT+ObYouFGIMj/EC6eD7G/1w3/8+YsXfv7zN39tDxpyYvhkD0Uhnds07AmTtIYq5D5s2PJIkTdKdSuhU2r0iL8B66aqm1
nKQCQ/bnX6WAqeJg4dYpNS3QT92U6pjiRXI9eBQ/lYgQ5BLLPosdL4NytomDq4zOPpnc0Ob2voHYU7ujZuywpbSiRY4EW/xs4Sbc3l9CB9rB2P
O5KV0xpOoLdNK3Eq5mXHuVZjN45QWRja6vZ/T7Vx/G+ARnQdmj9ZyVX1JJipbHsdv3hoN0EA2dyYK9mh7/VHjb5VLaTEZRjRZDl8tTDrW/mKQy
RaMTWQmSygy+3wJRLRHshcLQ3UVSbHjtNiwwq8106deFzpvAV/VZ07oW8uLiPaLE7j8KA/brcEFW6USTe4hHjSqTsMhJ7WONg1fzlD/mc1x5gu
NxHuAE8jzL2/wI15boaTPo3DaRrTS+0J+gv+MNcAdphmQQiluc2jgGEpS/cP/XfHUyN0XjrJc+gT9II7lFgWgkSz6oCzZzVuCO2IUp3/QAjaVN
M5UqEXPS3wCLP6tDK3VKdxWTpZR581Vlgv9UkODOP2ZknTMcn4VvYjA0vbumSEGq4SBka4k+s9Q7tZwZzRpkn8irtrNWchqOWxz75sLNYwlznJ
VAHo0swcjbqpwH9jGOIR59I1CQs+M87JttFHBFA/+tPY6QjLcvj0ePngKieUl6ua24nc3ibyZkxtGFfi3WU4Ag9QpzYvMLzHNfBJmy4A/VS16/
BacVhWk/esPGmh3gLppNtAgoy7huyoQwmzUyjrFSrOQMbfOg6eoPgZBKUPIjB+GkHsI+zBzAG8IQ8Y31xe/EVVqwm9p1KP32No1B+I9ipAzHSY
l2nuqDHdtQgL5c1Jb4jNIpDxJJpNohrKCcvnd9M6/P1uepCzdfNjj3cMBTMqSgDKSi1HyKFEjGMMNqlWUwq3KYXLAXwQbSkIe94ug/EBWY4NS5
OffyrFDjblMpRMzbHd2kqqiI1gDk23gmn5t2uzTh0CuPwfAziWn4UalgjOgjXrLdkDCIXeQgTSODzVxDmzRMY9ECGEdWkMaHleKey1VZQZ1mW8
rDCygizZjMardXCNTe6YAdLEbwN76pE8YOyLOPQb0BOXu9hcw3uEpgucQFNS9DEsYAe3QQj+QEaPmKV2nQFV8PiLsZRwF1XTG9OUDYBPhXOvHj
CzwqkcBOHPLmEgTg1eHvfDmPyYk6cTWR5yFAz5z2eWId/tHKF6/ilqbljc7I/lmHG58q9YTVBJjmiItU4sPy98pPUrHzf4g76Vul3y5ZtvN96c
JR6LOpWrT+JVmCyRU/otw264OpGheFpEDkox5KDSueY0/91l4KvKFV9x1WBDqQ8eZVTXrXHyDLXX2xi+m25woBQEoqerGt5w8nWDaFk5FoOUM5
agXlxxsmqOcq7pczwUemUXOJZ/dCv1xs0vrZpqL11xkeLe0Lc1CE57XNW4qdh+zaOXcvW/1Q9oVuSlf7pjIOWm8U+cZPtZGUMNB/4EHazrJtHZ
i076BUeok/Pv6dB/XydlynIk/zZSg27B38QcCHKGSu6xyejpZpPGIPD/gLHkOmzv8Xu3UhYz0p+43WhT/nPdrv8LOiJBavy3DCXb/tihjvmtyO
rdS9gioTtaL/uhsg4xO+GcIdU/f/3lp//4iyP+87fffviPHznmDwb8iQN//uWnX3+s//rf33/iyF9/+BcD//nTH//90x/1n3/98Nd//Rny5Dl8
Dt6BzhrcZGhz/bUZs5oJSAv5Q1UcsJh50ccwrYv9gb4kGqo7wZYAEvwBjYlc1fYjJWi79v3DwebAxVCIb7OQuwe903ZUc0xXKqQ0Q/YZ1cnXDO
5/Pqs3WvkD6DriER/BLGwGVWUmnAYhFjpN9upOlZC9qtpWBhL8//BCPYkEMS0s9nXhTxL6Z9q5ba62dX8Sl8/2Y9G1/QoQpBnP/T2f0KzN/FT2
mhpT81P9+l9/ucva3UISpbK9th2A2vUmAtiUDgsEkbaIsYULhShgg0yqSwD8PhFClXCbKdq6mcGMGRB2uHiaNo9LXBPHknGowcSaVSvEMNHCVj
7W2gDsA7rrWUIruj2XShWuBHUKT6P1V+HW4w3c5v2pGTR/K+pjuuuIoJ+aZqDQRRU9i/qT6OnDXzmzR81AaHJPeatM0fDj/cvHI5UP3x9pfP9h
X4NG+jsabb+87fHQfTk1uwpN8/LVVzh/at0P7OieR6hyFzRn3FHqoN3bof+e91k3zttRWvWkj/ivdzXu6P9+YVWMgXeZoe0bu/yb3KMxCkePaM
flNL7tKqyX6wDNVlnFbLfYewp2Og+jQgcrkXlzWcfs1NjTmNTxk3SnYGS++9p6UoWsYRVwxZy2pOw9yHRDD/gPLacx08nvv//48w752w73Z5n7
87//VSap2mZYbaedy5TdJrSn4f3N0AafpxShVVr7YU+X7G2sDeuuGmSultb8d+OIlq2gRVtw9vSC7UQHWqRU39VyrXfyr7vj8MHzOqDXnR0Nu+
nnCRWcOt3/qJHiM/F3vgX3Uxnq9uZ2nA+c2k4uMPuROObVOOBlKJpox/kAjiwWWlOVlwrITkVvKfQ1A9kaTc9+mOfxvqdK67w4xN3ROXdoSrOj
cJlVu6uw8zmdCm6yxEUlt16xo2qM6jYFXG2MpOr3x8/jsOAJxTEuTuKSQnOjXlOMPCdNCQoVuV7W8zmBado2bQkMkVQVBpzTcGF43KdqUOmbaa
QER8N39BsTFTpH6AzzE3sxgVtn0tyHeDdeLlnIA4bS/Rh3kZBAixOtPss0lKnF8yHnx5RG3k3DvKDBScIZJzpka5cQXY0eaLocxkNha5rJTSn0
tkxjr4QgL0RoERnjbq9U+uZ2DBODOFrl0g6jTmf9JbixbE8w5v5gfT0mHiKKMKRuUjNYpBLNPCZ1jaMa1aYZxFHw244NTxRCg1/jHq8Qnj21ki
fTd3cUfFAqSRy3LEzsoS+YAVUjhleRK1ZYQVsjjZzDn7FnCRoEMuHh187D6wQM1FfNQNC9bTBXdnEx8rTxP8DeifYt5phRjkRzDpYhP144N8Rw
aDhWws1e9gJpTyllWKqTxzOZeCafKlJhGawPXGUVdlIpT5ChR4R5A3C7r3+7qOraHSJcb6A3otqQSQXCSo23laAaCAO0q2+BPN6UDBSCmRWPoV
f4QIJbAtIaqHjZ7EELg9TOGm9DYIS66tos5gao8XAcYq54GbH2HsQyhN6sU+Ti9qzepH5CBQdpJzE8oylP4vGMHhpd0U6TZ3TVclLLM5oKp7/Q
fPEZ5V6orrlCb/IZZegtDujWEPozy1NJpju0BXtC8S7VaWQUjR+vOsqlGWuzTEnhZff2l+B27BA/3G9l55yM4NYSnewOCJ9pFy79NQXr3Hz48O
H7wNuGfjEzs26+mnYPtjlsffpPp5ecIy8PPIOL3zxlnDywFKQE7gDgqFnceUI3L7hFocBBWhUoqEGU6Hhy5cP7xzvdTO+0FKcRWlL7W5lJwEgy
doIxFNRJMUFm2KdHgvbjq0w1cYIkhTbLnpgwx7THGB7gkoPryUy8xLA9+NeDWLp0ItIcVYrhoC6DtEyxNnwVA9HqZIJR59NjWOXqRKzE5TJLu+
8ioeIHG6wZVzqfJcXdyb8JbM7ZS8AZffua0umY4GBkD70pjaMwDzS4LQG0cGjnsX67NGOTWKyaWTzCTGPht1vT1vPl5PGWFlZPa5zF/NbIFEAj
zlbNuSb2ijQ8dJI5dV01E9KtZVRdReQIO+vrRQVFKczOpuO2RWeCrLosQW6dG2ikNyn/Am43efCypuF1khukazm0L2hOdQ0uN3uSAIvKrEdpst
9Y/Nmf8GaSobp9eXn/nRf11x+/cYL5wcPLIwBtC2LEGMlFUPBoi9BymIPw/AOBu/SdTJY3oQDdoLcOxuCmXx9TuG24Ns6OC7gzCSzRxhavxKJR
XomL3jVjnVFexPd42pSce4euc+f2A2WIX5WtRbfs0c308v79V3sa1zvkvGlPA+3R9/gkc3Aq9oz5PY3p4WifBdCs3u0qg/74Ornv7y6rGmsJVy
oYtEJzdjy/oy3y+rUxlsnRQ0IdXHlQr7K2mZVTOQqi6UsRwBwIabHPVieEntGp56k/0jP9omMdXOo+PaVoGrVjPfrGe2rUp+6657Rq2yt5RvX4
TZymW+Xe19b7HwSHc2USM4qu/uma8yO15nFBk4JjRWt4e6yImf4JtXWgOuxI7fP4xDP/caRSVKC3PypgrZz2yufO19pNNG+6XOBxArArh222dh
W4h7bzDjyPiX/01jtvvPVXOBY+GRt2qaozxRe99IYoU3e58gHDMqE5wtRS8nIpk0kVFpP3q5QdS6fV2n5dtluB7dVajmvlq+yoYcwpjCjZ4jCk
FPpRM/Wc51t7tHPxTSHxiqHvBOwquCdurwuJtVNHOhVoz3H6kWG0eJVj4a6sOvWEXNCCk2FwjjzG08JkEHsMC0NMD+h9YC99GfuO4QlpzlGY5r
it6B0g6nTa6yMBo9jltQxbtVy6MUp4m+BxIe3EOjTXCBkvFzME9BDX74GuLu5ZDpGkIfDO4KKo4rHgeBJE1tFiKpm7mAeaNw2xNCfb/m+t14n2
IdO6Z/dwvzhkh6DRdswjuIC1Sd4vm0dA+yLbWswwvNxQN+p3so+wBcT5rOjMIA8Ew94MqpqL4GA8E9B49HSk2d6wNrRlYwM3G90IC0QY7yxhBA
PbLge5rGTFLCkcYLsXKQqd7c7uCc04uMhBWiw3Ns4Z5w/y2FUgh8ZFrntcuLgUbmL0t7RQW/SpBvPXg8RZHCvaw9bIFZnDxmkLBcfxS/g25rDQ
6LsBNAl05uwATRtZ/TFsHp6kbNcgcEgoOi3FyViNhc8KfPx4iDYGq8/B0+63U3ANr2HsFO7y5EZaCVAJRQPODNYXlaMui6W4D4G2iW2XfgdSAD
mDtBAKgyUEZ0HTsJyRvnGc6RxDv6PxtHpzE4nuqvo3yOX/z19//f6n8YawEf/81y8s/ic9iqWMJXFtph1CPEO8a7oNan5Xza2TIeKLmq7RlWjI
YAtjV7pCeHrM8hIgEhcO6h6PgDLFmWNMQULjHZYexuFAw8xKegb3ztS4T9zMw8Z4FunQhDpFaSHrk5h5IgzbnISzyVC+ZirDHjF5UKffbLnRxv
ocsZM7rRLQPLK0s1/OueJN2OEvksttn15uAbrOXfx+BrBb4DKYkj2H7WoLR+hpHNhbxtO4ZF/RkDX/9Jp/el16el18eh09vaOd0e43mp60kNuI
LD1iOyGQGexfP0mmJ4UHGkEN+3LC7aTQjV5pLRw7WuNMPhy2y6qmMQpkwgAzG/4iYMGO1DnFzAo2B5IjEPQdM0DPLdQ4KfRHEcbGD36rt06482
CqazfSas1TevOIWa4mp2WYb90C1tHN1rbiKd3FHoUNjDkIQA6vah7Jl+dTAcC1vV9izoC66Jnb/lFUWLTdlnJaz9Xp3MDAtB/RdYWYdgOO7jM7
QsbL03fsxqdM4ssffhZU2uHZ0BOQRj8ZUsyNdg3PeK2wv7Zu92dVmK+dxYu7cUfnLM05Vjs6/8gIsjlBzyt4tLg9k6d2vqNLsQpumhRon4+0lm
XGFeRVHig2o7aHih8pTlNtPIx7/6QHd2DWwL6jOwHpSXXrXORJ7QMteyjMYtbb5FGo57XraLfQoZ51Q7qvZtLVLLDjvMRT6s/oGMNYyM9PhHrD
w1S7J/IM1hi2utlXJBOcAx06X/H4meP0lNKiehwk1IH71+OkMn5TqXN5qGkPYzIN7oG2XuRkVpePFOl49KPUNMwX1AD2hqeUTIl9TrVTh0WaNt
Id6LwK6NecDlPRzlcchJZXn67NKhKHzWaoazcwHCg5pzq1TSp6xWE5ugubmkMddKVbI3Wkie0M9FLQ0A9aswd5Ht2/x5zsYs/i29ekKso4LXtC
8UCFnmfNnZ7S3Uxj9tWNPRKZ8e0rnmGALWfj73ZXEdumncrE6xnf6Dslz2vSaK+e12E4ylYz5NEtT+1UPcEdxktt/Uzemqdmty31ijh73dblSj
1RNOYfzyQa6h+kgcudz7yQHsSkr+PBF7W2ngc6OIG5r2M/y2k9/iwbYR1XHqhPaxWOOUrjhvSe9oEuHpsafRuh98HDG2y7afu6/tDA4xuXcRqh
N/B4QnNaawmDVxOj4951ePM/dtgZrXqxEXk+t3nfn8/levhMuIqwW5bI01S5ViQaWhp74jENV/UD2pO+rG7K0GGTS7rlcZzVyFIwAsiGIJGLgy
ZvkyZ5dJviH+eCRhj0F6rH8Tbb9QOkFOnoia0hQt6Nz+y2tIDBpREz+zJHT4qnSNRYXWgjTIBBd1roDKgELojYGfKMdD4tOcp7i2LIUiwN24kH
j486mfsxuNt0khPGpD7DXb973uXsmcK7KugysSUz10wLt+TjYffpY8xR9yHS4y7BQB6iL2rcTuRImOW2S1oG3tP9B8OWsxOrkIj168vxLW4vVX
38rG2Qm5WXVIV7mSwfh/hWTdp15LFUT/J32S5FYeDP31MaELDa3Bv5RmOPo9nM5zRpVWJPwR+/fKC0p6UG51sdPQo/E7v4jn/sKEWc2SEYI/ca
FwcDKOgKFuBiXWxO+YwQM7UeIvagpRAyY+QQouhnQPHB0dSnb3bMqa5cji3rF4ZK0Q1bDdFiJx89BhVHY/GNw7DL74xtIr0rRACn4/tdrZ3Of6
TH95aLc8PpdHBW85izZeNPdaHNrNCwAgLNsxoejdYv/gJ9Bm/CCf0ZbSKZ0H9I5K8T+ZtNHrCJcIJdi/GyX3EJsO2oNjKVwT9+yZcEt9hLAm0x
kK0Rls/vsKOs0cxj+bvt6Y/1Q2MvR2jAsUtCUqCDf2t0uxiIAwwGaStXgKF5D9bShJjlIbp2R0oYAf2K+as4GLRdNxc404BtXiBUJ9m5EB0Ev8
0643FiMU6mQHMbgzgWNYbLEexsdiLQbOSKoEV2knaZRSi9JrkmlzblWvQuSVc+yWzrhZfxC+NxveZKLza2i6WC9HPGMoEnX2vmsSw3OgJGb1dV
rfoLVZQbYsPaALNjIUDoxx6nlsMYp8/UQV8HRatw9jfagumwbT3XIdbewInGjgCqI0Gu8/B8bb/Lc72jIQT9DUxuXu32W/trGjsvyKt4VZBxHe
D8oH/2yBU3KA3oAsMhikF0Te/mgNcG3aU5iYzhIci7UAv56nUX1gGD8d7pQXMYSAA43/AbYKyTvWzL/ybjORe1OcMpCGeWjUSX0wFybr57+fBV
ANB0zibbpXovL5hDN2lW5AjAA5hbjMWBh+5UhHE7Gp2zZU9dD66xWqytWVsIk/1qCJhzujKkhsJFdkA5Q/Ni7+7yRHUbZZJQqKy/nAjrbxz6Vm
NWq+0RcciNJ/PXOV0zArogmMzauEWwnjcOl41MJ0Pa6VAHGcMLK9hvawVjY2Ekd1afLZQWlI2/2o6eNYhEz7n28s2p+WxBElmV4FmCVnbmAE6y
NgBGxEZUuXDM95GnxarjL7nhd9c0hRoCOKOrvYRGJF7YHnQVC1QdppyHAgbdPWIoMDaIcOZuPahpwp1WUBhfblinmi0q9JcszfwVmac2y9wFUN
+b+Y4AgmwmoQVRywMtFjY88N23gc4f24Y4U4cNiWPmoA8vmRZA2NFgcPm6QJuUPImuoEGpzWxgykCG5oLi0am90obYFLc9Su7JmGM/j4NMcaz9
F9FPMW6MVyJIjc3SZXEZkhfB42Bi5G0yZ5wZECevaIrDiGN7auylO0jGSMmeJQOaHp25pr+4fzkQ0WWlcZEZgtbpcghhnyqS0ftJAJgjrSIAv2
iIBC/hvmwokk+BQMbPG8qfxlModp9DKdGFrx2JeNRSKJvqNQTGhtq3CEojvGVxm3VMKYox+gghRKdyJcCghbGCDeEo8Hv0Rm+TTyz/AZNPhy5A
3QU0z1rFUgny2ZNQOvPcnbzAw0WlN982ZBBPGp/uKQCxOjFgSZu2XvrzxxmaTmTTOUN/L9w97distmeTUuFJUhl5gVbuLh4MQ863zME0GbfVPA
a1LrEzBHobE6+7d5NroQtElaVqTAeVGkf76StGxXXACgTKeGqL508qTHCUEih9FRsHs/UmRe1KTIZfoGdEJ1x7olUz7pXGo4lZkFeAcHBrjpeV
9UufAodEVP7Ijs4X/BCposYuYdKb+q2OsFIley1OdGBggtsDlBKYCQH/MAHgnzhbjmh2HMi4dKzDUmGBHUJHb5rmJJuBrNPsDHdG28wtm1/alD
kLnEF9ZDiaf3WFCOApUE1+C/SY8OSvXD9OJn3F065jcQeMUwTiCo18hOEAx03izwW4pGQP9BHBo6PIooV2cB23JQ7YQcOIEsE2IRmzp5c1KBFa
5OP6LsCiZifCd+7hG59YI2l/QjJrgiIya4VClmuIQj5ri0KSaY5COv30efsSglm7FJO7tyZVOsNVXOLvtVGcRt5MRVpJ8Wa4tLFClahxckCOcq
1Hghd10rYjwJ7h0lKXNRQhmDUwCcncGjUSDmBamo1KGxvP8EFlTU7EZJkubU8CbJ/T6XvH1bBH9vE0EL6uzRhezwcVjMS2MVgw+ooH1MEoLBx/
paPrbWDjhxXpMHsbjW3jsCiL+OGYG4h5tVDLD8Ti8fc2IAuGYtEgLBp++YFXPOSKBlvZQD4evgejsGz85YqsSwtzIAIz1neDMl/lhCN88xpuNO
9HbH4wD/WPm34NritxRh9GDISbPHE5hKWGy9ixzEkOauAI9Yrmls2IazkMfZPDgw2wF624CN2w0a768bPoTwo+LccOqvgGWoz1MvbsbVATLte6
nDALHnyTBtvLXN1glZjxuGs18OxJzCfRjponZ/EZMxRDNWKApOGpK2Vdjhm7EdKLv02iy9fuFSIzszxUHtCVYqkJItOLAgV9xVU8YjJLPwAw3g
MDX8fhUt/gT04pPQvZ5fgngaeVZ/BNfBa3K66U5FwvOuiwcNGaIDkVHtEldU7+LZY0ayKMGzjFRLP3GUXZ6zaiv7WMhL7cPYsddCSHsY9TsEnD
livayDIQdGNx6Upw1El2Yl51gbqotWeptbuIQoiNePRiqJXu0Nc0qzGP6K6PpR5TITbNZ9lc61lO66nDcXWu0coB3cxxFB5eOvBPND8Q4YbOse
/qkxjYMM5qwDdiqRm9THLMRY7zhX8w1EyQTg+WmqUshAdN2KAle9d1hRw3sxS0S6W4q7lMLaJjg+vE8sq/VKeW6yoKSd2tb7I/jet84Vgofgt7
Wz8OIql1LAOtIYyyi/lsGOe7YF8Aj/ni3xmtQ9eL6DhuHvvSq0Gm1TwDfbul9DDHVb16w+3Uxyo4IkVDseuIG+Ufz9xxFmr+En2NPaLLl9wB3R
7coo87/Xh9OZ8KidONr+JW5mQhufUkkk6GI+54xjfPqOWzySwcvazzjS9W6w1ti9jSiJ7HZVujkRUaTkUawQJbAEMHM8tCFjO1NG7LZdkeD8ZD
9zNcxeqUBnmvP0uRvSSM1XF1lEyS+NbETBrNPFgbC46Q0rfHWcmuFNyqRSpDd1Kc0j6CxfWNgU33YYAuST8y9Kygc83hN+xd64xoIGnP45ymPl
FoIgS9HoYw5+I168JwSfuLYAuV6V1wBBmFNYux1jwxkThDHFSb41wTQvgq+gy8wtOVymAI95q/neo6NYwqTyqFfgOYtFXjPQcLyQ39+WVtblm2
qLpxxc4zE3yflTODzo8sQxtCwyjquqIZS/78XkFn8pL0pAwB31SPC/N8BZU4/JsmxXLQcjEETr8xLzNI6Lpz+XqQr6Ll4Ht9hYGeviom+yD7CS
12HizFdMwd9RiTLhER0MpdaxhSjZ3i4k50K25cKo1XlT9pvHWQw5jCDYUEHdak8CSHQT9gqMEVx/mKO0NNPZeRpvNcjLqhC1FfJH56LSXDvDF5
eF3ENQNhRI7fPMcVFFPude4CvulwWZhkuOP2jfKNaFA3aMXc9xjpAOv7Yi1DzG/VaBz8B4KtpULEeSJ3IFXjOhFhJDYqdISVwmFwFnPGNSlOZ1
skGLkLTLBhpZo+hY1TnA0NQ1PvP24vQI75nGANfKwUHPnhIOc3OJHtm61zR92Ed/f7nTy647gdnR+9e2sv+J887vxI86W4XIPIP433Abz8Uerb
Mk4/DYvlftq6ASj+At/zL5qNIWlQP+M4Ha9/xXUec/mbHFZ/8VNL5qEkKnvfHxLHKnirCZWmnOBCDq/Tw19UaHMl1m7RG2Qu3r11c0t/qpM6n6
/2Eg0k6Qq7CnhiCQn21AjMbV5eO2EE8qRHV/oq5WIuMS/0Aofy0gBvXUsp2Hdk6md/K2EPnHVyROKfuje2aGST5IgwPhYic1onxNomO4CEjkya
5R0d9YJ/qnq7NJt34aNbyXovGx2wabZrPzk92Ss6mssINCFnLl9p0YSu0ebbqQx0tARdWqtDujZb0N01LqrIYdkAPXavTnK+oYywWSqTTFbKEP
5St91kf6r/hdpwPckff3WAkE7FmNN5wdjORZL9sTZzMaX6y7WdN9AY21mxHe+De/MUqU7rMDyadmAo6486J1r07p3D3h16Tp2/7jm0eeHQWdCp
SQx17TSHov1dDivNPbOns9hzHL0K4n+Gmpd+YmHNwRodVOfw5g0t5x4mW9QdejttrtuHhxSdhcn5CZB8nBSH7tEiblsWSHnn6doroK9HsYmfNK
3w+BdBd+B4VPMWIoz1sRXEcp8hVY2rBVt2C5g42gERDNByUmEx1yN6K2TYLGnHOCBzFPsmjnqxSwtbwkZgEkvj3skK69QGsYjKonXi3WKtgW1U
mxCftN1+kuB2N14MMiF/0mjdmUO4Jx/9xsRU/oEMDm9J3v1jFLKHXfG3sLO3tyKk8euyvPuMJvqf35rX02B/0PJbQPvXPMyOX+3ws5Qt7qD08m
w2yj1q7HR4NWpTMJJWxj0LgUhWwuiVsEePh/8/CIRmUA=="""

_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib")
_DEFAULT_EXCLUDES = ("**/node_modules", "**/__pycache__", "**/.*", "**/__editable__.*")
_ENV_MARKERS = (("bin", "activate"), ("Scripts", "activate"), ("pyvenv.cfg",), ("conda-meta",))
_RELEASE_LEVELS = {"alpha": 0, "beta": 1, "candidate": 2, "final": 3}
_TYPE_IGNORE = re.compile(r"((^|#)\s*)type:\s*ignore(\[[\s\w\-,]*\]|\s|$)")
_PYRIGHT_IGNORE = re.compile(r"((^|#)\s*)pyright:\s*ignore(\[([\s\w\-,]*)\]|\s|$)")
_PYRIGHT_DIRECTIVE = re.compile(r"^\s*pyright:\s*(.*)$")

FOUND, STUB_ONLY, MISSING = "found", "stub_only", "missing"


# ---------------------------------------------------------------------------------------------- tables
def _version_tuple(text):
    parts = [int(p) for p in text.split(".") if p.isdigit()]
    return tuple(parts) if parts else None


def _load_tables():
    versions = {}
    for word in _STDLIB_VERSIONS.split():
        name, _, span = word.partition(":")
        low, _, high = span.partition("-")
        versions[name] = (_version_tuple(low) or (3, 0), _version_tuple(high) if high else None)
    stdlib = set(_STDLIB_MODULES.split())
    stubs, stub_dirs = set(), set()
    for word in zlib.decompress(base64.b64decode("".join(_STUB_MODULES.split()))).decode("ascii").split():
        if word.endswith("/"):
            stub_dirs.add(word[:-1])
        else:
            stubs.add(word)
    return versions, stdlib, stubs, stub_dirs


# ---------------------------------------------------------------------------------------- file system
class _FS(object):
    """Cached directory listings: path → (files, directories), symlinks followed."""

    def __init__(self):
        self._cache = {}

    def listing(self, path):
        got = self._cache.get(path)
        if got is None:
            files, dirs = set(), set()
            try:
                with os.scandir(path) as it:
                    for entry in it:
                        try:
                            if entry.is_dir():
                                dirs.add(entry.name)
                            elif entry.is_file():
                                files.add(entry.name)
                        except OSError:
                            pass
            except OSError:
                pass
            got = self._cache[path] = (files, dirs)
        return got


class _Result(object):
    """What pyright's _resolveAbsoluteImport returns, as far as finding is concerned."""

    __slots__ = ("found", "paths", "namespace", "package_dir", "expected")

    def __init__(self, found, paths, namespace, package_dir, expected):
        self.found, self.paths, self.namespace, self.package_dir = found, paths, namespace, package_dir
        self.expected = expected  # how many name parts were asked for

    def first_real(self):
        for i, p in enumerate(self.paths):
            if p:
                return i
        return -1


def _pick_best(best, new):
    """pyright's _pickBestImport, reduced to what decides found or not found."""
    if best is None:
        return new
    if new is None:
        return best
    if new.found or (new.paths and len(new.paths) < new.expected):
        so_far, now = best.first_real(), new.first_real()
        if so_far != now:
            if so_far < 0:
                return new
            if now < 0:
                return best
            return best if so_far < now else new
        if new.found and not best.found:
            return new
    return best


class Resolver(object):
    def __init__(self, root, extra_paths, stub_path, search_paths, version, platform, fs=None):
        self.root = root
        self.extra_paths = extra_paths
        self.stub_path = stub_path
        self.search_paths = search_paths
        self.version = version
        self.platform = platform
        self.fs = fs or _FS()
        self.versions, self.stdlib, self.stubs, self.stub_dirs = _load_tables()
        self._cache = {}

    # -- one root, pyright's resolveAbsoluteImport/_resolveAbsoluteImport
    def _in_root(self, root, parts, allow_native, use_stub_package):
        if use_stub_package:
            result = self._walk(root, parts, False, True)
            if result.package_dir and (not result.namespace or result.found):
                return result
        return self._walk(root, parts, allow_native, False)

    def _walk(self, root, parts, allow_native, stub_package):
        paths, namespace, package_dir = [], False, False
        directory = root
        if not parts:
            files, _ = self.fs.listing(directory)
            has_init = "__init__.pyi" in files or "__init__.py" in files
            return _Result(True, [os.path.join(directory, "__init__")] if has_init else [""], not has_init, False, 0)
        last_index = len(parts) - 1
        for i, part in enumerate(parts):
            name = part + "-stubs" if stub_package and i == 0 else part
            files, dirs = self.fs.listing(directory)
            sub = os.path.join(directory, name)
            is_dir = name in dirs
            if is_dir:
                if i == 0:
                    package_dir = True
                sub_files, _ = self.fs.listing(sub)
                if "__init__.pyi" in sub_files or "__init__.py" in sub_files:
                    paths.append(os.path.join(sub, "__init__"))
                    if i < last_index:
                        directory = sub
                        continue
                    break
            if name + ".pyi" in files or name + ".py" in files:
                paths.append(sub)
            elif allow_native and self._native(files, name):
                paths.append(sub)
            elif is_dir:
                paths.append("")
                namespace = True
                if i < last_index:
                    directory = sub
                    continue
            break
        return _Result(len(paths) >= len(parts), paths, namespace, package_dir, len(parts))

    @staticmethod
    def _native(files, name):
        prefix = name + "."
        for f in files:
            if f.startswith(prefix) and f.endswith(_NATIVE_SUFFIXES):
                return True
        return False

    # -- typeshed tables
    def _stdlib_has(self, parts):
        dotted = ".".join(parts)
        if dotted not in self.stdlib:
            return False
        for n in range(1, len(parts) + 1):
            span = self.versions.get(".".join(parts[:n]))
            if span:
                low, high = span
                if self.version[: len(low)] < low:
                    return False
                if high is not None and self.version[: len(high)] > high:
                    return False
        return True

    def _stub_result(self, parts):
        """What pyright finds for PARTS in typeshed's third-party stubs: a found result, or None."""
        dotted = ".".join(parts)
        if dotted not in self.stubs and dotted not in self.stub_dirs:
            return None
        paths = []
        for n in range(1, len(parts) + 1):
            prefix = ".".join(parts[:n])
            paths.append("stub" if prefix in self.stubs else "")
        return _Result(True, paths, dotted not in self.stubs, True, len(parts))

    # -- pyright's _resolveBestAbsoluteImport + the parent-directory fallback
    def resolve_absolute(self, parts, file_dir):
        key = tuple(parts)
        verdict = self._cache.get(key)
        if verdict is None:
            verdict = self._cache[key] = self._best_absolute(parts)
        if verdict != MISSING:
            return verdict
        current = file_dir
        while len(current) > len(self.root) and current.startswith(self.root):
            if self._walk(current, parts, False, False).found:
                return FOUND
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        return MISSING

    def _best_absolute(self, parts):
        if self.stub_path:
            typings = self._in_root(self.stub_path, parts, False, True)
            if typings.found and not (typings.namespace and not typings.paths[-1]):
                return FOUND
        best = self._in_root(self.root, parts, True, True)
        for extra in self.extra_paths:
            best = _pick_best(best, self._in_root(extra, parts, True, True))
        if self._stdlib_has(parts):
            if parts[0] == "typing_extensions":  # in typeshed's stdlib, but a third-party distribution
                roots = [self.root] + self.extra_paths + self.search_paths
                return FOUND if any(self._walk(r, parts, True, False).found for r in roots) else STUB_ONLY
            return FOUND
        for path in self.search_paths:
            best = _pick_best(best, self._in_root(path, parts, True, True))
        if best is not None and best.found:
            return FOUND
        stub = self._stub_result(parts)
        if stub is not None:
            best = _pick_best(best, stub)
            if best is stub:
                # a stub module without its source is pyright's reportMissingModuleSource; a namespace
                # directory of the stubs is no diagnostic at all
                return FOUND if stub.namespace else STUB_ONLY
        return FOUND if best is not None and best.found else MISSING

    def resolve_relative(self, dots, parts, names, file_dir):
        """`from .(parts) import names`; names is None when unknown (then any directory will do)."""
        directory = file_dir
        for _ in range(dots - 1):
            parent = os.path.dirname(directory)
            if parent == directory:
                return MISSING
            directory = parent
        if not parts and names is not None:
            # pyright's _isPossibleImportDir: an imported name, or else __init__, must be in the directory
            resolvable = self._resolvable_names(directory)
            if not any(n in resolvable for n in names) and "__init__" not in resolvable:
                return MISSING
        return FOUND if self._walk(directory, parts, True, False).found else MISSING

    def _resolvable_names(self, directory):
        files, dirs = self.fs.listing(directory)
        names = {f.split(".")[0] for f in files}
        names.update(dirs)
        names.update(d[: -len("-stubs")] for d in dirs if d.endswith("-stubs"))
        return names


# ------------------------------------------------------------------------------- reachability (binder)
def _const(node):
    """(True, value) for a literal node on any Python 3.7+ ast, else (False, None)."""
    if isinstance(node, ast.Constant):
        return True, node.value
    kind = type(node).__name__
    if kind == "Num":
        return True, node.n
    if kind in ("Str", "Bytes"):
        return True, node.s
    if kind == "NameConstant":
        return True, node.value
    return False, None


def _subscript_index(node):
    index = node.slice
    if type(index).__name__ == "Index":  # Python 3.7/3.8
        index = index.value
    return index


class _Env(object):
    def __init__(self, version, platform, constants):
        self.version = version  # (major, minor, micro, releaselevel-rank, serial)
        self.platform = platform  # "linux", "darwin", "win32" or None for "All"
        self.constants = constants


def _compare(op, left, right):
    if isinstance(op, ast.Lt):
        return left < right
    if isinstance(op, ast.LtE):
        return left <= right
    if isinstance(op, ast.Gt):
        return left > right
    if isinstance(op, ast.GtE):
        return left >= right
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    return None


class _FileScan(object):
    """Walks one module the way pyright's binder marks code reachable, collecting import module names."""

    def __init__(self, env, lines=None):
        self.env = env
        self.lines = lines  # the source's lines, to place an alias before Python 3.10 gave it a lineno
        self.sys_aliases = []
        self.typing_aliases = []
        self.imports = []  # (line, leading dots, parts, imported names or None, reachable), in source order
        self.reachable = True

    # static conditions: pyright's staticExpressions.evaluateStaticBoolLikeExpression, with `and`/`or`
    # three-valued as the binder's flow labels make them (`A and B` with a false A is never true)
    def static_bool(self, node):
        if type(node).__name__ == "NamedExpr":
            return self.static_bool(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.static_bool(node.operand)
            return None if value is None else not value
        if isinstance(node, ast.BoolOp):
            values = [self.static_bool(v) for v in node.values]
            decisive = isinstance(node.op, ast.Or)  # True decides an `or`, False an `and`
            if decisive in values:
                return decisive
            return None if None in values else not decisive
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._static_compare(node.left, node.ops[0], node.comparators[0])
        if isinstance(node, ast.Name):
            if node.id == "TYPE_CHECKING":
                return True
            if node.id in self.env.constants:
                return bool(self.env.constants[node.id])
        if isinstance(node, ast.Attribute):
            if node.attr == "TYPE_CHECKING" and isinstance(node.value, ast.Name):
                if node.value.id in self.typing_aliases:
                    return True
            if node.attr in self.env.constants:
                return bool(self.env.constants[node.attr])
        return _truthiness(node)

    def _alias_line(self, node, name):
        """Line of NAME in a (possibly backslash-continued) `import a, b` statement, on old Pythons."""
        if len(node.names) > 1 and self.lines:
            pattern = re.compile(r"(^|[\s,\\])" + re.escape(name) + r"(\s|,|\\|$|#)")
            for number in range(node.lineno, min(node.lineno + 20, len(self.lines) + 1)):
                text = self.lines[number - 1]
                if pattern.search(text.split("#")[0]):
                    return number
                if not text.rstrip().endswith("\\"):
                    break
        return node.lineno

    def _is_sys_attr(self, node, attr):
        return (
            isinstance(node, ast.Attribute)
            and node.attr == attr
            and isinstance(node.value, ast.Name)
            and node.value.id in self.sys_aliases
        )

    def _static_compare(self, left, op, right):
        if self._is_sys_attr(left, "version_info") and isinstance(right, ast.Tuple):
            wanted = self._version_literal(right)
            if wanted is None:
                return None
            return _compare(op, self.env.version[: max(2, len(wanted))], wanted)
        if isinstance(left, ast.Subscript) and self._is_sys_attr(left.value, "version_info"):
            ok_i, index = _const(_subscript_index(left))
            ok_r, value = _const(right)
            if ok_i and index == 0 and not isinstance(index, bool) and ok_r and type(value) is int:
                return _compare(op, (self.env.version[0], 0), (value, 0))
            return None
        ok, text = _const(right)
        if not (ok and isinstance(text, str)):
            return None
        if self._is_sys_attr(left, "platform"):
            if self.env.platform is None:
                return None
            return _compare_str(op, self.env.platform, text)
        if isinstance(left, ast.Attribute) and left.attr == "name" and isinstance(left.value, ast.Name):
            if left.value.id == "os":
                if self.env.platform is None:
                    return None
                return _compare_str(op, "nt" if self.env.platform == "win32" else "posix", text)
        name = None
        if isinstance(left, ast.Name):
            name = left.id
        elif isinstance(left, ast.Attribute):
            name = left.attr
        if name is not None and isinstance(self.env.constants.get(name), str):
            return _compare_str(op, self.env.constants[name], text)
        return None

    @staticmethod
    def _version_literal(node):
        items = node.elts
        values = []
        for item in items[:5]:
            ok, value = _const(item)
            if not ok:
                break
            values.append(value)
        if len(items) == 1 and values and type(values[0]) is int:
            return (values[0], 0)
        if len(values) < 2 or not all(type(v) is int for v in values[:2]):
            return None
        out = list(values[:2])
        for v in values[2:]:
            if type(v) is int:
                out.append(v)
            elif isinstance(v, str) and v in _RELEASE_LEVELS and len(out) == 3:
                out.append(_RELEASE_LEVELS[v])
            else:
                break
        return tuple(out)

    # statements. block(statements, reachable) walks them all, recording every import with whether it is
    # reachable (unreachable ones still matter to pyright's per-file cache of relative imports), and tells
    # whether the code after them is reachable.
    def block(self, statements, reachable=True):
        for statement in statements:
            reachable = self.statement(statement, reachable)
        return reachable

    def statement(self, node, reachable):
        kind = type(node).__name__
        if kind == "Import":
            for alias in node.names:
                line = getattr(alias, "lineno", None) or self._alias_line(node, alias.name)
                self.imports.append((line, 0, alias.name.split("."), None, reachable))
                if reachable and "." not in alias.name:
                    if alias.name == "sys":
                        self.sys_aliases.append(alias.asname or "sys")
                    elif alias.name in ("typing", "typing_extensions"):
                        self.typing_aliases.append(alias.asname or alias.name)
            return reachable
        if kind == "ImportFrom":
            parts = node.module.split(".") if node.module else []
            names = [alias.name for alias in node.names if alias.name != "*"]
            self.imports.append((node.lineno, node.level or 0, parts, names, reachable))
            return reachable
        if kind in ("Return", "Raise", "Continue", "Break"):
            return False
        if kind == "Assert":
            return reachable and self.static_bool(node.test) is not False
        if kind == "If":
            value = self.static_bool(node.test) if reachable else None
            body_open = self.block(node.body, reachable and value is not False)
            else_open = self.block(node.orelse, reachable and value is not True)
            return (body_open and value is not False) or (else_open and value is not True)
        if kind == "While":
            value = self.static_bool(node.test) if reachable else None
            self.block(node.body, reachable and value is not False)
            else_open = self.block(node.orelse, reachable and value is not True)
            if value is True:
                return reachable and _has_break(node.body)
            return else_open or (reachable and _has_break(node.body))
        if kind in ("For", "AsyncFor"):
            self.block(node.body, reachable)
            self.block(node.orelse, reachable)
            return reachable
        if kind in ("With", "AsyncWith"):
            self.block(node.body, reachable)
            return reachable
        if kind in ("Try", "TryStar"):
            body_open = self.block(node.body, reachable)
            handlers_open = False
            for handler in node.handlers:
                handlers_open = self.block(handler.body, reachable) or handlers_open
            else_open = self.block(node.orelse, body_open)
            final_open = self.block(node.finalbody, reachable)
            return (else_open or handlers_open) and final_open
        if kind == "Match":
            for case in node.cases:
                self.block(case.body, reachable)
            return reachable
        if kind in ("FunctionDef", "AsyncFunctionDef", "ClassDef"):
            self.block(node.body, reachable)
            return reachable
        return reachable


def _compare_str(op, left, right):
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    return None


def _truthiness(node):
    """pyright's static truthiness of a literal: True/False/None, `...`, numbers, plain strings, displays."""
    ok, value = _const(node)
    if ok:
        if value is None or isinstance(value, bool):
            return bool(value)
        if value is Ellipsis:
            return True
        if isinstance(value, (int, float, complex)):
            return value != 0
        if isinstance(value, (str, bytes)):
            return len(value) > 0
        return None
    if isinstance(node, (ast.List, ast.Set, ast.Tuple)):
        if not node.elts:
            return False
        return True if any(not isinstance(e, ast.Starred) for e in node.elts) else None
    if isinstance(node, ast.Dict):
        if not node.keys:
            return False
        return True if any(k is not None for k in node.keys) else None
    return None


_NESTED_SCOPES = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                  ast.Lambda)


def _has_break(statements):
    """Whether a loop body has a `break` of its own (not one of a nested loop or function)."""
    stack = [s for s in statements if not isinstance(s, _NESTED_SCOPES)]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Break):
            return True
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _NESTED_SCOPES))
    return False


# --------------------------------------------------------------------------------- comments & fallback
class _Comments(object):
    def __init__(self):
        self.ignore_all = False
        self.type_ignore = set()
        self.pyright_ignore = {}  # line → None (all rules) or set of rules
        self.rule = None  # "off" / "on" from `# pyright: reportMissingImports=...`


def _read_comments(data):
    comments = _Comments()
    if b"type:" not in data and b"pyright:" not in data:
        return comments
    seen_code = False
    try:
        tokens = list(tokenize.tokenize(iter(data.splitlines(True)).__next__))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        tokens = None
    if tokens is None:
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            at = line.find("#")
            if at >= 0:
                _note_comment(comments, line[at + 1:], number, False)
        return comments
    quiet = (tokenize.ENCODING, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.COMMENT, tokenize.ENDMARKER)
    for token in tokens:
        if token.type == tokenize.COMMENT:
            _note_comment(comments, token.string[1:], token.start[0], not seen_code)
        elif token.type not in quiet:
            seen_code = True
    return comments


def _note_comment(comments, text, line, before_code):
    if _TYPE_IGNORE.search(text):
        if before_code:
            comments.ignore_all = True
        comments.type_ignore.add(line)
    match = _PYRIGHT_IGNORE.search(text)
    if match:
        rules = match.group(4)
        comments.pyright_ignore[line] = None if rules is None else {r.strip() for r in rules.split(",")}
    match = _PYRIGHT_DIRECTIVE.match(text)
    if match and not text.strip().startswith("pyright: ignore"):
        for item in match.group(1).split(","):
            key, _, value = item.partition("=")
            if key.strip() == "reportMissingImports" and value.strip():
                comments.rule = "on" if value.strip() in ("true", "error") else "off"


def _describe(exc):
    line = getattr(exc, "lineno", None)
    return "%s: %s%s" % (type(exc).__name__, getattr(exc, "msg", None) or exc, " (line %d)" % line if line else "")


def _parse_tolerant(data, path):
    """ast of DATA; failing that, of DATA with the lines that do not parse (Python 2 print statements,
    `except E, e:`, syntax newer than this interpreter...) replaced by `pass`, so that the rest keeps its
    reachability, as pyright's parser recovers from errors. Top-level statements are repaired one at a time.
    Returns (tree or None, the first error's text or None, numbers of the lines replaced)."""
    try:
        return ast.parse(data, filename=path), None, set()
    except (SyntaxError, ValueError) as exc:
        first = _describe(exc)
        if not isinstance(exc, SyntaxError) or b"\0" in data:
            return None, first, set()
    try:
        encoding = tokenize.detect_encoding(iter(data.splitlines(True)).__next__)[0]
        lines = data.decode(encoding, "replace").splitlines(True)
    except (SyntaxError, LookupError):
        return None, first, set()
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    dropped = set()
    _blank_py2_statements(lines, dropped)
    try:
        return ast.parse("".join(lines), filename=path), first, dropped
    except (SyntaxError, ValueError):
        pass
    chunks = _top_level_chunks(lines) or [(0, len(lines))]
    body = []
    for begin, end in chunks:
        tree = _repair(lines, begin, end, dropped, path)
        if tree is None:
            dropped.update(range(begin + 1, end + 1))  # their imports come from the tokens
        else:
            body.extend(tree.body)
    module = ast.Module(body=body, type_ignores=[]) if sys.version_info >= (3, 8) else ast.Module(body=body)
    return module, first, dropped


def _repair(lines, begin, end, dropped, path, attempts=60):
    """Parse lines[begin:end] (at their own line numbers), replacing failing lines; None if it cannot."""
    for _ in range(attempts):
        try:
            return ast.parse("\n" * begin + "".join(lines[begin:end]), filename=path)
        except SyntaxError as exc:
            number = exc.lineno
            if not number or not begin < number <= end or number in dropped:
                return None
            line = lines[number - 1]
            indent = line[: len(line) - len(line.lstrip())]
            if isinstance(exc, IndentationError) and "unexpected indent" in str(exc.msg):
                for previous in range(number - 2, begin - 1, -1):
                    if lines[previous].strip() and not lines[previous].lstrip().startswith("#"):
                        indent = lines[previous][: len(lines[previous]) - len(lines[previous].lstrip())]
                        break
            code = line.split("#")[0].strip()
            if code.startswith("except") and code.endswith(":"):
                lines[number - 1] = indent + "except:\n"
            elif code.endswith(":"):
                lines[number - 1] = indent + "if __envyard_unknown__:\n"  # neither branch static
            else:
                lines[number - 1] = indent + "pass\n"
            dropped.add(number)
        except (ValueError, RecursionError, MemoryError):
            return None
    return None


def _top_level_chunks(lines):
    """(begin, end) line ranges of the top-level statements, clauses (`else:`, `except:`...) and decorators
    kept with theirs; None when the text does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(iter(lines).__next__))
    except (tokenize.TokenError, SyntaxError):
        return None
    starts, previous, after_decorator = [], None, False
    quiet = (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokens:
        if token.type in quiet:
            if token.type != tokenize.NL and token.type != tokenize.COMMENT:
                previous = token
            continue
        at_statement = previous is None or previous.type in (tokenize.NEWLINE, tokenize.DEDENT)
        if at_statement and token.start[1] == 0:
            continues = token.string in ("else", "elif", "except", "finally") or after_decorator
            if not continues:
                starts.append(token.start[0] - 1)
            after_decorator = token.string == "@"
        previous = token
    if not starts:
        return None
    starts[0] = 0
    return list(zip(starts, starts[1:] + [len(lines)]))


def _blank_py2_statements(lines, dropped):
    """Python 2 in one pass, what would otherwise cost a parse each: `print x`, `exec code`, `print >>f, x`
    become `pass`, `raise E, msg` becomes `raise`, `except E, e:` becomes `except:`; `0777`, `10L`, `ur""`
    and `<>` are rewritten in place."""
    try:
        tokens = [t for t in tokenize.generate_tokens(iter(lines).__next__)
                  if t.type not in (tokenize.COMMENT, tokenize.NL)]
    except (tokenize.TokenError, SyntaxError):
        return
    edits = []  # (start, end, text) over (row, col) positions, statement-wide ones first
    count = len(tokens)
    for i, token in enumerate(tokens[:-1]):
        at_statement = i == 0 or tokens[i - 1].type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) \
            or tokens[i - 1].string in (":", ";")
        if token.type != tokenize.NAME or not at_statement:
            continue
        end = i
        depth = 0
        comma = False
        while end < count and tokens[end].type not in (tokenize.NEWLINE, tokenize.ENDMARKER) and not (
                depth == 0 and tokens[end].string == ";"):
            depth += tokens[end].string in ("(", "[", "{")
            depth -= tokens[end].string in (")", "]", "}")
            comma = comma or (depth == 0 and tokens[end].string == ",")
            end += 1
        following = tokens[i + 1]
        text = None
        if token.string in ("print", "exec") and (
                following.type in (tokenize.STRING, tokenize.NUMBER)
                or (following.type == tokenize.NAME and following.string not in (
                    "if", "else", "and", "or", "in", "is", "not", "for"))
                or following.string in (">>", "`", "-", "[", "{")):
            text = "pass"
        elif token.string == "raise" and comma:
            text = "raise"
        elif token.string == "except" and comma and tokens[end - 1].string == ":":
            text = "except:"
        if text is not None:
            edits.append((token.start, tokens[end - 1].end, text))
    spans = list(edits)
    for i in range(count - 1):
        token, following = tokens[i], tokens[i + 1]
        adjacent = token.end == following.start
        fix = None
        if token.type == tokenize.NUMBER and token.string == "0" and adjacent and following.type == \
                tokenize.NUMBER and following.string.isdigit():
            fix = (token.start, following.end, "0o" + following.string)
        elif token.type == tokenize.NUMBER and adjacent and following.type == tokenize.NAME and \
                following.string in ("L", "l"):
            fix = (following.start, following.end, "")
        elif token.type == tokenize.NAME and token.string.lower() == "ur" and adjacent and \
                following.type == tokenize.STRING:
            fix = (token.start, token.end, "r")
        elif token.string == "<>":
            fix = (token.start, token.end, "!=")
        if fix and not any(a <= fix[0] and fix[1] <= b for a, b, _ in spans):
            edits.append(fix)
    for (row, col), (end_row, end_col), text in sorted(edits, reverse=True):
        tail = lines[end_row - 1][end_col:] if end_row == row else "\n"
        lines[row - 1] = lines[row - 1][:col] + text + tail
        for number in range(row + 1, end_row + 1):
            lines[number - 1] = "\n"
        dropped.update(range(row, end_row + 1))


def _fallback_imports(data):
    """Imports of a file `ast` cannot parse, from its tokens (or, failing those, its lines), all taken as
    reachable: (line, dots, parts, imported names or None, True)."""
    found = []
    try:
        tokens = [t for t in tokenize.tokenize(iter(data.splitlines(True)).__next__)
                  if t.type not in (tokenize.COMMENT, tokenize.NL)]
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        tokens = None
    if tokens is None:
        pattern = re.compile(r"^\s*(?:from\s+(\.*)\s*([\w.]*)\s+import\b|import\s+([\w.]+(?:\s+as\s+\w+)?"
                             r"(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*))")
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            m = pattern.match(line)
            if not m:
                continue
            if m.group(3) is not None:
                for piece in m.group(3).split(","):
                    found.append((number, 0, piece.split()[0].split("."), None, True))
            else:
                parts = m.group(2).split(".") if m.group(2) else []
                found.append((number, len(m.group(1)), parts, None, True))
        return found
    starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        at_start = i == 0 or tokens[i - 1].type in starts or tokens[i - 1].string in (";", ":")
        if token.type == tokenize.NAME and at_start and token.string in ("import", "from"):
            i, names = _parse_import_tokens(tokens, i)
            found.extend(names)
            continue
        i += 1
    return found


def _dotted(tokens, i):
    """A dotted name starting at tokens[i]: (parts, index after it)."""
    parts = []
    while i < len(tokens) and tokens[i].type == tokenize.NAME and tokens[i].string != "import":
        parts.append(tokens[i].string)
        if i + 1 < len(tokens) and tokens[i + 1].string == ".":
            i += 2
        else:
            i += 1
            break
    return parts, i


def _parse_import_tokens(tokens, i):
    n = len(tokens)
    line = tokens[i].start[0]
    if tokens[i].string == "import":
        found, i = [], i + 1
        while i < n:
            line_here = tokens[i].start[0]
            parts, i = _dotted(tokens, i)
            if not parts:
                break
            found.append((line_here, 0, parts, None, True))
            if i < n and tokens[i].string == "as":
                i += 2
            if i < n and tokens[i].string == ",":
                i += 1
                continue
            break
        return i, found
    i += 1
    dots = 0
    while i < n and tokens[i].string in (".", "..."):
        dots += len(tokens[i].string)
        i += 1
    parts, i = _dotted(tokens, i)
    if not (i < n and tokens[i].string == "import" and (dots or parts)):
        return i, []
    i += 1
    names = []
    parenthesized = i < n and tokens[i].string == "("
    if parenthesized:
        i += 1
    while i < n and tokens[i].type in (tokenize.NAME, tokenize.OP) and tokens[i].string not in (")", ";"):
        if tokens[i].type == tokenize.NAME and tokens[i].string != "as" and tokens[i - 1].string != "as":
            names.append(tokens[i].string)
        elif tokens[i].string not in (",", "*") and tokens[i].type == tokenize.OP:
            break
        i += 1
    return i, [(line, dots, parts, names, True)]


# --------------------------------------------------------------------------------------- configuration
def _strip_jsonc(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _mini_toml_table(text, table):
    """Keys of one TOML table with string, bool, number or string-array values (Pythons without tomllib)."""
    values, inside, pending = {}, False, None
    for raw in text.splitlines():
        line = raw.strip()
        if pending is not None:
            key, buffer = pending
            buffer += " " + line
            if _balanced(buffer):
                values[key] = _toml_value(buffer)
                pending = None
            else:
                pending = (key, buffer)
            continue
        if line.startswith("["):
            inside = line.strip("[] ") == table
            continue
        if not inside or "=" not in line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        key, value = key.strip().strip('"'), value.strip()
        if value.startswith("[") and not _balanced(value):
            pending = (key, value)
        else:
            values[key] = _toml_value(value)
    return values


def _balanced(text):
    depth, quote = 0, None
    for c in text:
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "#":
            break
    return depth <= 0


def _toml_value(text):
    text = text.strip()
    if text.startswith("["):
        return [a or b for a, b in re.findall(r"\"((?:[^\"\\]|\\.)*)\"|'([^']*)'", text)]
    if text[:1] in "\"'":
        end = text.find(text[0], 1)
        return text[1:end] if end > 0 else text[1:]
    word = text.split("#")[0].strip()
    if word in ("true", "false"):
        return word == "true"
    return word


def _load_config(root):
    path = os.path.join(root, "pyrightconfig.json")
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.loads(_strip_jsonc(f.read()))
            return (data if isinstance(data, dict) else {}), "pyrightconfig.json"
        except (OSError, ValueError):
            return {}, "pyrightconfig.json (unreadable)"
    path = os.path.join(root, "pyproject.toml")
    if not os.path.isfile(path):
        return None, None
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None, None
    if b"tool.pyright" not in raw:
        return None, None
    loads = None
    try:
        import tomllib

        loads = tomllib.loads
    except ImportError:
        try:
            import tomli  # pyright: ignore[reportMissingImports]

            loads = tomli.loads
        except ImportError:
            pass
    text = raw.decode("utf-8", "replace")
    if loads is not None:
        try:
            data = loads(text).get("tool", {}).get("pyright")
        except Exception:  # noqa: BLE001 - a broken pyproject is pyright's problem too; read what we can
            data = _mini_toml_table(text, "tool.pyright")
    else:
        data = _mini_toml_table(text, "tool.pyright")
    if not isinstance(data, dict):
        return None, None
    return data, "pyproject.toml [tool.pyright]"


def _spec_regex(root, spec):
    """pyright FileSpec: a path relative to ROOT with `**`, `*`, `?`; matches the path and all below it."""
    path = spec if os.path.isabs(spec) else os.path.join(root, spec)
    path = os.path.normpath(path).replace(os.sep, "/")
    out = []
    for i, part in enumerate(path.split("/")):
        if i:
            out.append("/")
        if part == "**":
            out.append("(.*/)?")
            continue
        for c in part:
            out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
    pattern = "".join(out).replace("(.*/)?/", "(.*/)?")
    return re.compile("^" + pattern + "($|/)")


# -------------------------------------------------------------------------------------------- the scan
def _search_paths(python, root):
    """The interpreter's sys.path less "", asked the way pyright asks (python -c, in ROOT)."""
    code = "import json, sys; json.dump([p for p in sys.path if p != ''], sys.stdout)"
    try:
        out = subprocess.run([python, "-c", code], cwd=root, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=60).stdout
        paths = json.loads(out.decode("utf-8"))
    except (OSError, ValueError, subprocess.SubprocessError):
        here = os.path.dirname(os.path.abspath(__file__))
        paths = [p for p in sys.path if p and os.path.abspath(p) != here]
    seen, out = set(), []
    for p in paths:
        p = os.path.normpath(os.path.join(root, p))
        if p not in seen and os.path.isdir(p):
            seen.add(p)
            out.append(p)
    return out


def _venv_site_packages(root, config):
    venv_path, venv = config.get("venvPath"), config.get("venv")
    if not (isinstance(venv_path, str) and isinstance(venv, str)):
        return None
    base = os.path.join(root, venv_path, venv)
    found = []
    for lib in ("lib", "lib64", "Lib"):
        lib_dir = os.path.join(base, lib)
        site = os.path.join(lib_dir, "site-packages")
        if not os.path.isdir(site) and os.path.isdir(lib_dir):
            for name in sorted(os.listdir(lib_dir)):
                if name.startswith("python3.") and os.path.isdir(os.path.join(lib_dir, name, "site-packages")):
                    site = os.path.join(lib_dir, name, "site-packages")
                    break
        if os.path.isdir(site) and site not in found:
            found.append(site)
    for site in list(found):
        for name in sorted(os.listdir(site)):
            if name.endswith(".pth"):
                try:
                    with open(os.path.join(site, name), encoding="utf-8", errors="replace") as f:
                        for line in f:
                            line = line.strip()
                            if line and not line.startswith("#") and not re.match(r"import\s", line):
                                target = os.path.normpath(os.path.join(site, line))
                                if os.path.isdir(target) and target not in found:
                                    found.append(target)
                except OSError:
                    pass
    return found or None


def _list_files(root, include, exclude, fs):
    """pyright's source enumeration: sorted, files before subdirectories, each real directory once."""
    files = []
    seen_real = set()

    def excluded(path):
        norm = path.replace(os.sep, "/")
        return any(rx.match(norm) for rx in exclude)

    def visit(directory):
        real = os.path.realpath(directory)
        if real in seen_real:
            return
        for marker in _ENV_MARKERS:
            if os.path.exists(os.path.join(directory, *marker)):
                return
        seen_real.add(real)
        names, dirs = fs.listing(directory)
        for name in sorted(names):
            if name.endswith((".py", ".pyi")):
                path = os.path.join(directory, name)
                if not excluded(path):
                    files.append(path)
        for name in sorted(dirs):
            path = os.path.join(directory, name)
            if not excluded(path):
                visit(path)

    for spec_root in include:
        if os.path.isfile(spec_root):
            files.append(spec_root)
        elif os.path.isdir(spec_root) and not excluded(spec_root):
            visit(spec_root)
    return files


def _file_imports(data, path, env, errors, rel):
    tree, error, dropped = _parse_tolerant(data, path)
    if error is not None:
        errors.append({"file": rel, "error": error})
    if tree is None:
        return _fallback_imports(data)
    lines = data.decode("utf-8", "replace").splitlines() if sys.version_info < (3, 10) else None
    walker = _FileScan(env, lines)
    walker.block(tree.body)
    imports = walker.imports + [i for i in _fallback_imports(data) if i[0] in dropped]
    imports.sort(key=lambda i: i[0])
    return imports


def _interpreter_version():
    v = sys.version_info
    return (v[0], v[1], v[2], _RELEASE_LEVELS.get(v[3], 3), v[4])


def scan(root, python=None, extra_exclude=()):
    """Scan ROOT with the running interpreter's view (search paths asked of `python`, default this one)."""
    root = os.path.normpath(os.path.abspath(root))
    fs = _FS()
    config, config_name = _load_config(root)
    config = config or {}

    version = _interpreter_version()
    configured_version = config.get("pythonVersion")
    if isinstance(configured_version, str) and _version_tuple(configured_version):
        version = _version_tuple(configured_version)[:2]
    platform = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)
    configured_platform = config.get("pythonPlatform")
    if isinstance(configured_platform, str):
        platform = {"linux": "linux", "darwin": "darwin", "windows": "win32"}.get(configured_platform.lower())
    constants = config.get("defineConstant") if isinstance(config.get("defineConstant"), dict) else {}
    env = _Env(version, platform, constants)

    rule_level = config.get("reportMissingImports")
    if isinstance(rule_level, bool):
        rule_on = rule_level
    elif isinstance(rule_level, str):
        rule_on = rule_level == "error"
    else:
        rule_on = config.get("typeCheckingMode") != "off"
    use_type_ignore = config.get("enableTypeIgnoreComments", True) is not False

    include = [root]  # `pyright ROOT` (EnvBench's call) overrides the config's include with ROOT
    configured_exclude = [p for p in config.get("exclude") or [] if isinstance(p, str)]
    exclude = [_spec_regex(root, p) for p in configured_exclude + list(_DEFAULT_EXCLUDES)]
    exclude += [_spec_regex(root, "**/" + name) for name in extra_exclude]
    ignore = [_spec_regex(root, p) for p in config.get("ignore") or [] if isinstance(p, str)]

    stub_path = os.path.join(root, config.get("stubPath") if isinstance(config.get("stubPath"), str) else "typings")
    stub_path = stub_path if os.path.isdir(stub_path) else None
    extra_paths = [os.path.normpath(os.path.join(root, p)) for p in config.get("extraPaths") or []
                   if isinstance(p, str)]
    if not extra_paths:
        src = os.path.join(root, "src")
        if os.path.isdir(src) and not os.path.exists(os.path.join(src, "__init__.py")):
            extra_paths = [src]
    search_paths = _venv_site_packages(root, config) or _search_paths(python or sys.executable, root)

    resolvers = []  # (execution root, its resolver): the first environment whose root holds a file is its
    for environment in config.get("executionEnvironments") or []:
        if isinstance(environment, dict) and isinstance(environment.get("root"), str):
            env_root = os.path.normpath(os.path.join(root, environment["root"]))
            env_extra = [os.path.normpath(os.path.join(root, p)) for p in environment.get("extraPaths") or []
                         if isinstance(p, str)] or extra_paths
            resolvers.append((env_root, Resolver(env_root, env_extra, stub_path, search_paths, version,
                                                 platform, fs)))
    resolvers.append((root, Resolver(root, extra_paths, stub_path, search_paths, version, platform, fs)))

    report = {"files": 0, "imports": 0, "missing": [], "stub_only": [], "ignored": 0, "errors": [],
              "python": ".".join(str(p) for p in sys.version_info[:3]), "config": config_name,
              "typeshed": TYPESHED}
    for path in _list_files(root, include, exclude, fs):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        report["files"] += 1
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            report["errors"].append({"file": rel, "error": "OSError: %s" % exc.strerror})
            continue
        try:
            imports = _file_imports(data, path, env, report["errors"], rel)
        except Exception as exc:  # noqa: BLE001 - one odd file (deep nesting, ...) must not sink the scan
            report["errors"].append({"file": rel, "error": "%s: %s" % (type(exc).__name__, exc)})
            continue
        if not imports:
            continue
        resolver = next(r for env_root, r in resolvers if path == env_root or path.startswith(env_root + os.sep))
        comments = None  # read only for a file that has something to report: tokenizing is most of the time
        file_ignored = any(rx.match(path.replace(os.sep, "/")) for rx in ignore)
        directory = os.path.dirname(path)
        relative_found = set()  # pyright caches a relative import's success per file and import name
        for line, dots, parts, names, reachable in imports:
            if dots:
                key = (dots, tuple(parts))
                if key in relative_found:
                    verdict = FOUND
                else:
                    verdict = resolver.resolve_relative(dots, parts, names, directory)
                    if verdict == FOUND:
                        relative_found.add(key)
            elif reachable:
                verdict = resolver.resolve_absolute(parts, directory)
            if not reachable:
                continue
            report["imports"] += 1
            if verdict == FOUND:
                continue
            entry = {"file": rel, "line": line, "module": "." * dots + ".".join(parts)}
            if verdict == STUB_ONLY:
                report["stub_only"].append(entry)
                continue
            if comments is None:
                comments = _read_comments(data)
            rules = comments.pyright_ignore.get(line, False)
            rule_here = rule_on if comments.rule is None else comments.rule == "on"
            type_ignored = use_type_ignore and (comments.ignore_all or line in comments.type_ignore)
            if (not rule_here or file_ignored or type_ignored or rules is None
                    or (rules and "reportMissingImports" in rules)):
                report["ignored"] += 1
                continue
            report["missing"].append(entry)
    return report


# ------------------------------------------------------------------------------ typeshed table builder
def dump_typeshed(typeshed_dir, label):
    """Print the three tables above from a typeshed checkout (pyright's dist/typeshed-fallback)."""
    stdlib_dir = os.path.join(typeshed_dir, "stdlib")
    spans = []
    with open(os.path.join(stdlib_dir, "VERSIONS"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].split(";")[0].strip()
            if ":" in line:
                name, span = line.split(":")
                spans.append("%s:%s" % (name.strip(), span.strip().replace(" ", "")))
    modules = set()
    for directory, _, names in os.walk(stdlib_dir):
        rel = os.path.relpath(directory, stdlib_dir)
        prefix = "" if rel == "." else rel.replace(os.sep, ".")
        for name in names:
            if name.endswith(".pyi"):
                modules.add(prefix if name == "__init__.pyi" else (prefix + "." if prefix else "") + name[:-4])
    stubs = set()

    def walk(directory, prefix):
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.startswith("@"):
                continue
            if os.path.isdir(path):
                package = os.path.exists(os.path.join(path, "__init__.pyi"))
                stubs.add(prefix + name + ("" if package else "/"))
                walk(path, prefix + name + ".")
            elif name.endswith(".pyi") and name != "__init__.pyi":
                stubs.add(prefix + name[:-4])

    stubs_dir = os.path.join(typeshed_dir, "stubs")
    for dist in sorted(os.listdir(stubs_dir)):
        if os.path.isdir(os.path.join(stubs_dir, dist)):
            walk(os.path.join(stubs_dir, dist), "")
    print("TYPESHED = %r" % label)
    print('_STDLIB_VERSIONS = """%s"""' % _wrap(spans))
    print('_STDLIB_MODULES = """%s"""' % _wrap(sorted(modules)))
    blob = base64.b64encode(zlib.compress("\n".join(sorted(stubs)).encode("ascii"), 9)).decode("ascii")
    print('_STUB_MODULES = """%s"""' % "\n".join(blob[i:i + 110] for i in range(0, len(blob), 110)))


def _wrap(words):
    lines, line = [], ""
    for word in words:
        if line and len(line) + len(word) > 110:
            lines.append(line)
            line = ""
        line = (line + " " + word) if line else word
    lines.append(line)
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- CLI
def main(argv):
    if argv[:1] == ["--dump-typeshed"] and len(argv) == 3:
        dump_typeshed(argv[1], argv[2])
        return 0
    args, exclude = [], []
    i = 0
    while i < len(argv):
        if argv[i] == "--exclude" and i + 1 < len(argv):
            exclude.append(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 1 or not os.path.isdir(args[0]):
        sys.stderr.write("usage: importscan.py [--exclude NAME]... ROOT\n"
                         "       importscan.py --dump-typeshed TYPESHED_DIR LABEL\n")
        return 2
    json.dump(scan(args[0], extra_exclude=exclude), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


# ------------------------------------------------------------------------------ engine side (envyard)
REMOTE_SCRIPT = "/tmp/envyard-importscan.py"
SCRIPT_PATH = os.path.abspath(__file__)


def script_source() -> str:
    """This file's text, to upload into the sandbox (e.g. to REMOTE_SCRIPT)."""
    with open(SCRIPT_PATH, encoding="utf-8") as f:
        return f.read()


def scan_command(python: str, root: str, script_path: str = REMOTE_SCRIPT) -> str:
    """Shell command running the scan of ROOT with the environment's interpreter; stdout is one JSON line."""
    q = shlex.quote
    return "cd %s && %s -I %s %s" % (q(root), q(python), q(script_path), q(root))


def parse_scan(stdout: str) -> dict:
    """The scan's report from its stdout (the last line that is a JSON object); ValueError otherwise."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except ValueError:
                break
            if isinstance(report, dict) and all(k in report for k in ("files", "imports", "missing", "errors")):
                if isinstance(report["missing"], list) and isinstance(report["files"], int):
                    return report
            break
    raise ValueError("not an import-scan report: %r" % stdout[-300:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
