"""Repairs as data: captured failure outputs → typed fixes. Pure functions, no sandbox.

Outputs below are trimmed from real runs of uv 0.13, pip 23, gcc 12, pytest 9 and Python 3.11/3.12 on Debian 12,
or reconstructed from the tools' messages where no run was practical (noted). CASES must cover every rule id in
data/repair_rules.toml (test_every_rule_has_a_case).
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources

import pytest

from envyard.setup.repairs import Fix, diagnose, matching_rules, rules, tables

NONE = frozenset()

# (stage, output, expected fixes as (kind, args, rule), local packages, rules recognized without a fix)
# retried: the step was already retried after a network failure (diagnose's `retried`)
CASES: list[tuple[str, str, list[tuple[str, tuple[str, ...], str]], frozenset[str], tuple[str, ...], bool]] = []


def case(stage, output, *expected, local=NONE, recognized=(), retried=False):
    CASES.append((stage, output, list(expected), frozenset(local), tuple(recognized), retried))


# ---- apt steps naming packages the archive no longer has (captured: flask 1.1.2's docs name python-virtualenv)

case("install", """\
Reading package lists...
E: Unable to locate package python-virtualenv
""", ("apt_drop", ("python-virtualenv",), "apt-unknown-package"))

case("install", """\
Package python-dev is not available, but is referred to by another package.
E: Package 'python-dev' has no installation candidate
""", ("apt_drop", ("python-dev",), "apt-unknown-package"))

# ---- a requirement PyPI does not have (captured: uv 0.13.9, a requirements.txt listing the Debian package alsa-utils)

case("install", """\
Using Python 3.11.7 environment at: /opt/venv
error: No solution found when resolving dependencies
  cause: Because alsa-utils was not found in the package registry and you require alsa-utils, we can conclude that your requirements are unsatisfiable.
""", ("drop", ("alsa-utils",), "not-on-pypi"))


# ---- a program the test suite checks for itself (captured: aioredis 1.3.1's conftest, collection)

case("collect", """\
INTERNALERROR>   File "/work/aioredis/tests/conftest.py", line 538, in pytest_configure
INTERNALERROR>     assert os.path.exists(bins), "There is no redis-server on your computer. Please install it first"
INTERNALERROR> AssertionError: There is no redis-server on your computer. Please install it first
""", ("apt", ("redis-server",), "tool-missing-said"))

case("collect", "which: no memcached in (/opt/venv/bin:/usr/local/bin:/usr/bin:/bin)\n",
     ("apt", ("memcached",), "tool-missing-said"))


# ---- a requirement from a URL that cannot be fetched (captured: uv 0.13.9, uvicorn 0.32.0's requirements.txt
# naming `h11 @ git+https://github.com/python-hyper/h11.git@master` on a machine that cannot reach GitHub)

case("install", """\
Using Python 3.11.7 environment at: /opt/venv
   Updating https://github.com/python-hyper/h11.git (master)
error: Failed to download and build `h11 @ git+https://github.com/python-hyper/h11.git@master`
  cause: Git operation failed
  cause: failed to clone into: /root/.cache/uv/git-v2/db/1d99b16f3b4ddff6
  cause: failed to fetch branch or tag `master`
  cause: process didn't exit successfully: `/usr/bin/git fetch --force --update-head-ok 'https://github.com/python-hyper/h11.git' '+refs/tags/master:refs/remotes/origin/tags/master'` (exit status: 128)
         --- stderr
         fatal: unable to access 'https://github.com/python-hyper/h11.git/': Could not resolve host: github.com
""", ("from_index", ("h11",), "unreachable-url-requirement"), retried=True)

# an archive URL that answers 404 (reconstructed from uv's wording for a failed download)
case("install", """\
  × Failed to download `oldlib @ https://example.org/dist/oldlib-1.0.tar.gz`
  ├─▶ Failed to fetch: `https://example.org/dist/oldlib-1.0.tar.gz`
  ╰─▶ HTTP status client error (404 Not Found) for url (https://example.org/dist/oldlib-1.0.tar.gz)
""", ("from_index", ("oldlib",), "unreachable-url-requirement"))


# ---- not fixable ----------------------------------------------------------------------------------------------

case("collect", """\
==================================== ERRORS ====================================
_____________________ ERROR collecting tests/test_util.py ______________________
/opt/venv/lib/python3.11/site-packages/_pytest/python.py:498: in importtestmodule
    mod = import_path(
E     File "/work/tests/test_util.py", line 12
E       print "expected", result
E       ^^^^^^^^^^^^^^^^^^^^^^^^
E   SyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?
""", recognized=("python2-syntax",))

case("install", """\
error: Failed to build `oldlib==0.3`
  cause: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.get_requires_for_build_wheel` failed (exit status: 1)

         [stderr]
         Traceback (most recent call last):
           File "<string>", line 14, in <module>
           File "<string>", line 9
             except ImportError, e:
                    ^^^^^^^^^^^^^^
         SyntaxError: multiple exception types must be parenthesized
         ModuleNotFoundError: No module named 'simplejson'
""", recognized=("python2-syntax",))

# ---- network --------------------------------------------------------------------------------------------------

case("install", """\
Using Python 3.11.2 environment at: /opt/venv
error: Request failed after 3 retries in 4.0s
  cause: Failed to fetch: https://pypi.org/simple/requests/
  cause: error sending request for url (https://pypi.org/simple/requests/)
  cause: client error (Connect)
  cause: dns error
  cause: error resolving DNS
  cause: failed to lookup address information: Temporary failure in name resolution
""", ("retry", (), "net-dns"))

case("install", """\
WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f3c2a1b5d50>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/requests/
ERROR: Could not find a version that satisfies the requirement requests (from versions: none)
ERROR: No matching distribution found for requests
""", ("retry", (), "net-dns"))

case("install", """\
Err:1 http://deb.debian.org/debian bookworm InRelease
  Temporary failure resolving 'deb.debian.org'
E: Unable to locate package libffi-dev
""", ("retry", (), "net-dns"))

case("install", """\
  File "/opt/venv/lib/python3.11/site-packages/pip/_vendor/urllib3/response.py", line 443, in _error_catcher
    raise ReadTimeoutError(self._pool, None, "Read timed out.")
pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out.
""", ("retry", (), "net-timeout"))

case("install", """\
error: Failed to download `torch==2.3.1`
  cause: Failed to download distribution due to network timeout. Try increasing UV_HTTP_TIMEOUT (current value: 30s).
""", ("retry", (), "net-timeout"))

case("install", """\
error: Failed to fetch: `https://pypi.org/simple/numpy/`
  Caused by: Request failed after 3 retries
  Caused by: error sending request for url (https://pypi.org/simple/numpy/)
  Caused by: connection closed before message completed
""", ("retry", (), "net-connection"))

case("install", """\
ERROR: HTTP error 503 while getting https://files.pythonhosted.org/packages/65/6e/09db70a523a96d25e115e71cc56a6f9031e7b8cd166c1ac8438307c14058/numpy-1.26.4.tar.gz
ERROR: Could not install requirement numpy==1.26.4 from https://files.pythonhosted.org/packages/numpy-1.26.4.tar.gz because of HTTP error 503 Server Error: Service Unavailable for url
""", ("retry", (), "net-server-error"))

case("install", """\
error: Failed to fetch: `https://pypi.org/simple/numpy/`
  Caused by: HTTP status server error (502 Bad Gateway) for url (https://pypi.org/simple/numpy/)
""", ("retry", (), "net-server-error"))

# ---- the interpreter does not fit --------------------------------------------------------------------------

case("install", """\
  Preparing editable metadata (pyproject.toml): finished with status 'done'
INFO: pip is looking at multiple versions of oldproj to determine which version is compatible with other requirements. This could take a while.
ERROR: Package 'oldproj' requires a different Python: 3.11.7 not in '<3.10'
""", ("python", ("older", "<3.10"), "pip-requires-python"))

case("install", """\
Using Python 3.11.2 environment at: /opt/venv
error: No solution found when resolving dependencies
  cause: Because the current Python version (3.11.2) does not satisfy Python>=3.12 and django==6.0 depends on Python>=3.12, we can conclude that django==6.0 cannot be used.
         And because you require django==6.0, we can conclude that your requirements are unsatisfiable.
""", ("python", ("newer", ">=3.12"), "uv-requires-python"))

case("install", """\
  × No solution found when resolving dependencies:
  ╰─▶ Because the current Python version (3.9.18) does not satisfy Python>=3.10,<3.13 and numpy==2.0.2 depends on Python>=3.10,<3.13, we can conclude that numpy==2.0.2 cannot be used.
""", ("python", ("newer", ">=3.10,<3.13"), "uv-requires-python"))

case("install", """\
ERROR: Ignored the following versions that require a different python version: 0.7 Requires-Python >=3.6, <3.7; 0.8 Requires-Python >=3.6, <3.7
ERROR: Could not find a version that satisfies the requirement dataclasses==0.8 (from versions: 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
ERROR: No matching distribution found for dataclasses==0.8
""", ("python", ("older", ">=3.6,<3.7"), "pip-ignored-python"))

case("install", """\
Using Python 3.11.2 environment at: /opt/venv
error: No solution found when resolving dependencies
  cause: Because tensorflow==2.3.0 has no wheels with a matching Python ABI tag (e.g., `cp311`) and you require tensorflow==2.3.0, we can conclude that your requirements are unsatisfiable.

hint: You require CPython 3.11 (`cp311`), but we only found wheels for `tensorflow` (v2.3.0) with the following Python ABI tags: `cp35m`, `cp36m`, `cp37m`, `cp38`
""", ("python", ("older", "<=3.8"), "uv-wheel-abi"))

case("install", """\
hint: You require CPython 3.11 (`cp311`), but we only found wheels for `fastlib` (v3.0) with the following Python ABI tags: `cp312`, `cp313`
""", ("python", ("newer", ">=3.12"), "uv-wheel-abi"))

case("install", """\
      building 'yarl._quoting_c' extension
      x86_64-linux-gnu-gcc -Wsign-compare -DNDEBUG -g -fwrapv -O2 -Wall -fPIC -I/opt/venv/include -I/usr/include/python3.11 -c yarl/_quoting_c.c -o build/temp.linux-x86_64-cpython-311/yarl/_quoting_c.o
      yarl/_quoting_c.c: In function ‘__Pyx__ExceptionSave’:
      yarl/_quoting_c.c:9631:21: error: ‘_PyErr_StackItem’ {aka ‘struct _err_stackitem’} has no member named ‘exc_type’
       9631 |     *type = exc_info->exc_type;
            |                     ^~
      error: command '/usr/bin/x86_64-linux-gnu-gcc' failed with exit code 1
""", ("python", ("older",), "c-api-too-new"))

# ---- C toolchain, headers, libraries, programs -------------------------------------------------------------

case("install", """\
      building 'pandas._libs.algos' extension
      pandas/_libs/algos.c:760:10: fatal error: numpy/arrayobject.h: No such file or directory
        760 | #include "numpy/arrayobject.h"
            |          ^~~~~~~~~~~~~~~~~~~~~
      compilation terminated.
""", ("build_deps", ("numpy",), "c-header-python-package"))

case("install", """\
         running build_ext
         building '_ldap' extension
         x86_64-linux-gnu-gcc -Wsign-compare -DNDEBUG -g -fwrapv -O2 -Wall -g -fstack-protector-strong -Wformat -Werror=format-security -g -fwrapv -O2 -fPIC -DHAVE_SASL -DHAVE_TLS -DLDAPMODULE_VERSION=3.4.4 -IModules -I/usr/include/python3.11 -c Modules/LDAPObject.c -o build/temp.linux-x86_64-cpython-311/Modules/LDAPObject.o

         [stderr]
         In file included from Modules/LDAPObject.c:3:
         Modules/common.h:15:10: fatal error: lber.h: No such file or directory
            15 | #include <lber.h>
               |          ^~~~~~~~
         compilation terminated.
         error: Command '['x86_64-linux-gnu-gcc', '-Wsign-compare', '-c', 'Modules/LDAPObject.c', '-o', 'build/temp.linux-x86_64-cpython-311/Modules/LDAPObject.o']' returned non-zero exit status 1.

hint: This error likely indicates that you need to install a library that provides "lber.h" for `python-ldap@3.4.4`
""", ("apt", ("libldap2-dev",), "c-header"))

case("install", """\
      In file included from src/lxml/etree.c:1121:
      src/lxml/includes/etree_defs.h:14:10: fatal error: libxml/xmlversion.h: No such file or directory
         14 | #include "libxml/xmlversion.h"
            |          ^~~~~~~~~~~~~~~~~~~~~
      compilation terminated.
      Compile failed: command '/usr/bin/x86_64-linux-gnu-gcc' failed with exit code 1
""", ("apt", ("libxml2-dev",), "c-header"))

case("install", """\
      c/_cffi_backend.c:15:10: fatal error: ffi.h: No such file or directory
         15 | #include <ffi.h>
      compilation terminated.
      src/_cffi_src/build/_openssl.c:575:10: fatal error: openssl/opensslv.h: No such file or directory
      src/ext.c:1:10: fatal error: Python.h: No such file or directory
""", ("apt", ("libffi-dev", "libssl-dev", "python3-dev"), "c-header"))

case("install", """\
      /usr/bin/ld: cannot find -lxml2: No such file or directory
      /usr/bin/ld: cannot find -lssl: No such file or directory
      /usr/bin/ld: cannot find -lcrypto: No such file or directory
      collect2: error: ld returned 1 exit status
""", ("apt", ("libxml2-dev", "libssl-dev"), "ld-missing-library"))

case("install", """\
      x86_64-linux-gnu-g++ -fno-strict-overflow -Wsign-compare -DNDEBUG -O2 -Wall -fPIC -I/usr/include/python3.11 -c src/ext.cpp -o build/ext.o
      x86_64-linux-gnu-gcc: fatal error: cannot execute ‘cc1plus’: execvp: No such file or directory
      compilation terminated.
""", ("apt", ("build-essential",), "compiler-incomplete"))

case("install", """\
      The Meson build system
      Version: 1.5.1
      Project name: scipy
      ../meson.build:1:0: ERROR: Unknown compiler(s): [['gfortran'], ['flang-new'], ['flang'], ['nvfortran'], ['pgfortran'], ['ifort'], ['ifx'], ['g95']]
      The following exception(s) were encountered:
      Running `gfortran --version` gave "[Errno 2] No such file or directory: 'gfortran'"
""", ("apt", ("gfortran",), "meson-no-compiler"))

case("install", """\
      ../meson.build:1:0: ERROR: Unknown compiler(s): [['cc'], ['gcc'], ['clang'], ['nvc'], ['pgcc'], ['icc'], ['icx']]
""", ("apt", ("build-essential",), "meson-no-compiler"))

case("install", """\
      -- The C compiler identification is unknown
      -- The CXX compiler identification is unknown
      CMake Error at CMakeLists.txt:3 (project):
        No CMAKE_CXX_COMPILER could be found.
""", ("apt", ("build-essential",), "cmake-no-compiler"))

case("install", """\
      building 'dfftpack' library
      error: library dfftpack has Fortran sources but no Fortran compiler found
""", ("apt", ("gfortran",), "fortran-missing"))

case("install", """\
        File "<string>", line 38, in run
      RuntimeError: CMake must be installed to build the following extensions: _pyjq
""", ("apt", ("cmake",), "cmake-missing"))

case("install", """\
      Traceback (most recent call last):
        File "/tmp/pip-build-env/overlay/lib/python3.11/site-packages/skbuild/setuptools_wrap.py", line 645, in setup
      Problem with the CMake installation, aborting build. CMake executable is cmake
""", ("apt", ("cmake",), "cmake-missing"))

case("install", """\
      running build_rust
      error: can't find Rust compiler

      If you are using an outdated pip version, it is possible a prebuilt wheel is available for this package but pip is not able to install from it. Installing from the wheel would avoid the need for a Rust compiler.
""", ("apt", ("rustc", "cargo"), "rust-missing"))

case("install", """\
  Cargo, the Rust package manager, is not installed or is not on PATH.
  This package requires Rust and Cargo to compile extensions. Install it through
  the system's package manager or via https://rustup.rs/
""", ("apt", ("rustc", "cargo"), "rust-missing"))

case("install", """\
         Error: pg_config executable not found.

         pg_config is required to build psycopg2 from source.  Please add the directory
         containing pg_config to the $PATH or specify the full executable path with the
         option:

             python setup.py build_ext --pg-config /path/to/pg_config build ...

         If you prefer to avoid building psycopg2 from source, please install the PyPI
         'psycopg2-binary' package instead.

hint: Build failures usually indicate a problem with the package or the build environment
""", ("apt", ("libpq-dev",), "tool-not-found"))

case("install", """\
      /bin/sh: 1: mysql_config: not found
      Traceback (most recent call last):
        File "setup_posix.py", line 29, in mysql_config
          raise EnvironmentError("%s not found" % (mysql_config.path,))
      OSError: mysql_config not found
""", ("apt", ("default-libmysqlclient-dev",), "tool-not-found"))

case("install", """\
Using Python 3.11.2 environment at: /opt/venv
error: Git operation failed
  Caused by: Git executable not found. Ensure that Git is installed and available.
""", ("apt", ("git",), "tool-not-found"))

case("install", """\
         no previously-included directories found matching 'Doc/.build'
         warning: build_py: byte-compiling is disabled, skipping.

         error: [Errno 2] No such file or directory: 'x86_64-linux-gnu-gcc'

hint: Build failures usually indicate a problem with the package or the build environment
""", ("apt", ("build-essential",), "tool-missing-errno"))

case("collect", """\
tests/conftest.py:8: in <module>
    REV = subprocess.check_output(["git", "rev-parse", "HEAD"]).decode()
/usr/lib/python3.11/subprocess.py:1950: in _execute_child
    raise child_exception_type(errno_num, err_msg, err_filename)
E   FileNotFoundError: [Errno 2] No such file or directory: 'git'
""", ("apt", ("git",), "tool-missing-errno"))

case("install", """\
      running build_ext
      building 'regex._regex' extension
      x86_64-linux-gnu-gcc -Wsign-compare -DNDEBUG -g -fwrapv -O2 -Wall -fPIC -I/usr/include/python3.11 -c regex_3/_regex.c -o build/temp.linux-x86_64-cpython-311/regex_3/_regex.o
      error: command 'x86_64-linux-gnu-gcc' failed: No such file or directory
""", ("apt", ("build-essential",), "tool-missing-exec"))

case("install", """\
    running build_ext
    building 'M2Crypto._m2crypto' extension
    swigging src/SWIG/_m2crypto.i to src/SWIG/_m2crypto_wrap.c
    unable to execute 'swig': No such file or directory
    error: command 'swig' failed with exit status 1
""", ("apt", ("swig",), "tool-missing-exec"))

case("install", """\
Collecting mylib@ git+https://github.com/example/mylib@v1.2
  Cloning https://github.com/example/mylib (to revision v1.2) to /tmp/pip-install-3x/mylib
ERROR: Cannot find command 'git' - do you have 'git' installed and in your PATH?
""", ("apt", ("git",), "tool-cannot-find-command"))

case("install", """\
         warning: build_py: byte-compiling is disabled, skipping.

         Package cairo was not found in the pkg-config search path.
         Perhaps you should add the directory containing `cairo.pc'
         to the PKG_CONFIG_PATH environment variable
         Package 'cairo', required by 'virtual:world', not found
         Command '['pkg-config', '--print-errors', '--exists', 'cairo >= 1.15.10']' returned non-zero exit status 1.
""", ("apt", ("libcairo2-dev",), "pkgconfig-missing"))

# reconstructed: h5py's setup through the pkgconfig package
case("install", """\
        File "/tmp/build-env/lib/python3.11/site-packages/pkgconfig/pkgconfig.py", line 249, in parse
          raise PackageNotFoundError(package)
      pkgconfig.pkgconfig.PackageNotFoundError: hdf5 not found
""", ("apt", ("libhdf5-dev",), "pkgconfig-python"))

# reconstructed: meson-python builds (pycairo 1.27, a BLAS user)
case("install", """\
      Run-time dependency cairo found: NO (tried pkgconfig and cmake)
      ../cairo/meson.build:31:12: ERROR: Dependency "cairo" not found, tried pkgconfig and cmake
""", ("apt", ("libcairo2-dev",), "meson-dependency"))

case("install", """\
      ../meson.build:50:2: ERROR: Dependency "OpenBLAS" not found, tried pkgconfig, cmake and system
""", ("apt", ("libopenblas-dev",), "meson-dependency"))

case("install", """\
      CMake Error at /usr/share/cmake-3.25/Modules/FindPackageHandleStandardArgs.cmake:230 (message):
        Could NOT find OpenSSL, try to set the path to OpenSSL root folder in the
        system variable OPENSSL_ROOT_DIR (missing: OPENSSL_CRYPTO_LIBRARY
        OPENSSL_INCLUDE_DIR)
""", ("apt", ("libssl-dev",), "cmake-find-package"))

case("install", """\
         Trying pkg-config --exists mysqlclient
         Command 'pkg-config --exists mysqlclient' returned non-zero exit status 1.
         Trying pkg-config --exists mariadb
         Command 'pkg-config --exists mariadb' returned non-zero exit status 1.

         [stderr]
         Traceback (most recent call last):
           File "<string>", line 28, in find_package_name
         Exception: Can not find valid pkg-config name.
         Specify MYSQLCLIENT_CFLAGS and MYSQLCLIENT_LDFLAGS env vars manually
""", ("apt", ("default-libmysqlclient-dev", "pkg-config"), "mysqlclient-pkgconfig"))

case("import", """\
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/work/src/vision/__init__.py", line 3, in <module>
    import cv2
  File "/opt/venv/lib/python3.11/site-packages/cv2/__init__.py", line 181, in <module>
    bootstrap()
ImportError: libGL.so.1: cannot open shared object file: No such file or directory
""", ("apt", ("libgl1",), "shared-library-missing"))

case("collect", """\
E   ImportError: libgthread-2.0.so.0: cannot open shared object file: No such file or directory
""", ("apt", ("libglib2.0-0",), "shared-library-missing"))

case("import", """\
  File "/opt/venv/lib/python3.11/site-packages/weasyprint/text/ffi.py", line 428, in _dlopen
    return ffi.dlopen(names[0])  # pragma: no cover
OSError: cannot load library 'gobject-2.0-0': gobject-2.0-0: cannot open shared object file: No such file or directory.  Additionally, ctypes.util.find_library() did not manage to locate a library called 'gobject-2.0-0'
""", ("apt", ("libglib2.0-0",), "shared-library-load"))

case("collect", """\
E   OSError: no library called "cairo-2" was found
E   no library called "cairo" was found
E   cannot load library 'libcairo.so.2': libcairo.so.2: cannot open shared object file: No such file or directory
""", ("apt", ("libcairo2",), "shared-library-missing"))

case("import", """\
  File "/opt/venv/lib/python3.11/site-packages/soundfile.py", line 192, in <module>
    raise OSError('sndfile library not found using ctypes.util.find_library')
OSError: sndfile library not found using ctypes.util.find_library
""", ("apt", ("libsndfile1",), "named-library-missing"))

case("import", """\
  File "/opt/venv/lib/python3.11/site-packages/sounddevice.py", line 71, in <module>
    raise OSError('PortAudio library not found')
OSError: PortAudio library not found
""", ("apt", ("libportaudio2",), "named-library-missing"))

case("collect", """\
E   ImportError: failed to find libmagic.  Check your installation
""", ("apt", ("libmagic1",), "libmagic-missing"))

case("collect", """\
tests/test_dates.py:5: in <module>
    locale.setlocale(locale.LC_ALL, "de_DE.UTF-8")
/usr/lib/python3.11/locale.py:626: in setlocale
    return _setlocale(category, locale)
E   locale.Error: unsupported locale setting
""", ("apt", ("locales-all",), "locale-missing"))

# ---- the build needs something in its environment ----------------------------------------------------------

case("install", """\
Using Python 3.11.2 environment at: /opt/venv
error: Failed to build `anyjson==0.3.3`
  cause: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.get_requires_for_build_wheel` failed (exit status: 1)

         [stderr]
         /root/.cache/uv/builds-v0/.tmptBAg0t/lib/python3.11/site-packages/setuptools/_distutils/dist.py:318: UserWarning: Unknown distribution option: 'test_suite'
           warnings.warn(msg)
         error in anyjson setup command: use_2to3 is invalid.

hint: Build failures usually indicate a problem with the package or the build environment
""", ("legacy_setuptools", ("setuptools<58",), "setuptools-use-2to3"),
     ("drop", ("anyjson",), "unbuildable-requirement"))  # the last resort comes last

case("install", """\
         Traceback (most recent call last):
           File "<string>", line 6, in <module>
         ImportError: cannot import name 'Feature' from 'setuptools' (/root/.cache/uv/builds-v0/.tmpX1/lib/python3.11/site-packages/setuptools/__init__.py)
""", ("legacy_setuptools", ("setuptools<46",), "setuptools-feature"),
     ("cutoff", (), "cutoff-import-name"))

case("install", """\
      error: Multiple top-level packages discovered in a flat-layout: ['docs', 'mypkg'].

      To avoid accidental inclusion of unwanted files or directories,
      setuptools will not proceed with this build.
""", ("legacy_setuptools", ("setuptools<61",), "setuptools-flat-layout"))

case("install", """\
        File "astropy/wcs/setup_package.py", line 13, in <module>
          from setuptools.dep_util import newer_group
      ModuleNotFoundError: No module named 'setuptools.dep_util'
""", ("legacy_setuptools", ("setuptools<70",), "setuptools-dep-util"))

case("install", """\
        File "setup.py", line 4, in <module>
          from setuptools.extern.packaging.version import Version
      ModuleNotFoundError: No module named 'setuptools.extern'
""", ("legacy_setuptools", ("setuptools<71",), "setuptools-extern"))

case("install", """\
           File "<string>", line 3, in <module>
         ModuleNotFoundError: No module named 'pkg_resources'
""", ("legacy_setuptools", ("setuptools<82",), "pkg-resources-build"))

case("install", """\
  usage: setup.py [global_opts] cmd1 [cmd1_opts] [cmd2 [cmd2_opts] ...]
     or: setup.py --help [cmd1 cmd2 ...]
     or: setup.py --help-commands
     or: setup.py cmd --help

  error: invalid command 'bdist_wheel'
""", ("legacy_setuptools", ("wheel",), "bdist-wheel-missing"))

case("install", """\
           File "<string>", line 2, in <module>
         ModuleNotFoundError: No module named 'distutils'
""", ("legacy_setuptools", ("setuptools",), "distutils-build"),
     ("apt", ("python3-distutils",), "debian-python-module"),
     ("python", ("older", "<3.12"), "stdlib-module-version"))

case("install", """\
           File "<string>", line 201, in get_source_files
         AttributeError: 'build_ext' object has no attribute 'cython_sources'

hint: Build failures usually indicate a problem with the package or the build environment
""", ("build_deps", ("cython<3",), "cython3-sources"))

case("install", """\
      Error compiling Cython file:
      ------------------------------------------------------------
      ...
      cdef class Reader:
          cdef object _buf
      ------------------------------------------------------------
      pkg/_reader.pyx:12:4: Cannot assign type 'void (void) except * nogil' to 'void (*)(void) noexcept nogil'
      Cython.Compiler.Errors.CompileError: pkg/_reader.pyx
""", ("build_deps", ("cython<3",), "cython3-compile"))

case("install", """\
      src/_ext.c:210:25: error: ‘PyArray_Descr’ {aka ‘struct _PyArray_Descr’} has no member named ‘subarray’
        210 |     if (descr->subarray) {
""", ("build_deps", ("numpy<2",), "numpy2-c-api"))

case("install", """\
        File "setup.py", line 10, in <module>
          from numpy.distutils.core import setup
      ModuleNotFoundError: No module named 'numpy.distutils'
""", ("build_deps", ("numpy<2",), "numpy-distutils-build"),
     ("python", ("older", "<3.12"), "numpy-distutils-python"))

case("install", """\
Using Python 3.11.2 environment at: /opt/venv
error: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.get_requires_for_build_editable` failed (exit status: 1)

         [stderr]
         Traceback (most recent call last):
           File "<string>", line 14, in <module>
           File "/root/.cache/uv/builds-v0/.tmpZwz2Cq/lib/python3.11/site-packages/setuptools/build_meta.py", line 317, in run_setup
             exec(code, locals())  # noqa: S102 # exec is intentional here
           File "<string>", line 2, in <module>
         ModuleNotFoundError: No module named 'Cython'
""", ("build_deps", ("cython",), "build-missing-module"))

case("install", """\
           File "<string>", line 5, in <module>
           File "/work/mypkg/__init__.py", line 1, in <module>
             import yaml
         ModuleNotFoundError: No module named 'yaml'
""", ("build_deps", ("pyyaml",), "build-missing-module"), local={"mypkg"})

case("install", """\
      LookupError: setuptools-scm was unable to detect version for /work.

      Make sure you're either building from a fully intact git repository or PyPI tarballs. Most other sources (such as GitHub's tarballs, a git checkout without the .git folder) don't contain the necessary metadata and will not work.
""", ("env", ("SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0",), "scm-version"))

case("install", """\
      Exception: Versioning for this project requires either an sdist tarball, or access to an upstream git repository. It's also possible that there is a mismatch between the package name in setup.cfg and the argument given to pbr.version.VersionInfo. Project name mypkg was given, but was not able to be found.
""", ("env", ("PBR_VERSION=0.0.0",), "pbr-version"))

# ---- imports at run time ------------------------------------------------------------------------------------

case("collect", """\
tests/test_build.py:3: in <module>
    from distutils.version import LooseVersion
E   ModuleNotFoundError: No module named 'distutils'
""", ("pip", ("setuptools",), "distutils-runtime"),
     ("apt", ("python3-distutils",), "debian-python-module"),
     ("python", ("older", "<3.12"), "stdlib-module-version"))

case("import", """\
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/opt/venv/lib/python3.12/site-packages/putiopy.py", line 11, in <module>
    import pkg_resources
ModuleNotFoundError: No module named 'pkg_resources'
""", ("pip", ("setuptools<82",), "pkg-resources-runtime"))

case("import", """\
  File "/work/src/gui/app.py", line 2, in <module>
    import tkinter as tk
ModuleNotFoundError: No module named 'tkinter'
""", ("apt", ("python3-tk",), "debian-python-module"))

case("collect", """\
E   ModuleNotFoundError: No module named 'lib2to3'
""", ("apt", ("python3-lib2to3",), "debian-python-module"),
     ("python", ("older", "<3.13"), "stdlib-module-version"))

case("collect", """\
  File "/opt/venv/lib/python3.12/site-packages/nose/importer.py", line 12, in <module>
    from imp import find_module, load_module, acquire_lock, release_lock
E   ModuleNotFoundError: No module named 'imp'
""", ("python", ("older", "<3.12"), "stdlib-module-version"))

case("import", """\
  File "/work/src/cfg/load.py", line 1, in <module>
    import tomllib
ModuleNotFoundError: No module named 'tomllib'
""", ("python", ("newer", ">=3.11"), "stdlib-module-version"))

case("collect", """\
test_f.py:1: in <module>
    from collections import Mapping
E   ImportError: cannot import name 'Mapping' from 'collections' (/root/.pyenv/versions/3.11.7/lib/python3.11/collections/__init__.py)
""", ("python", ("older", "<3.10"), "stdlib-name-import"))

case("import", """\
  File "/work/src/svc/models.py", line 3, in <module>
    from typing import Self
ImportError: cannot import name 'Self' from 'typing' (/usr/lib/python3.10/typing.py)
""", ("python", ("newer", ">=3.11"), "stdlib-name-import"))

case("collect", """\
  File "/opt/venv/lib/python3.11/site-packages/aiohttp_old/helpers.py", line 70, in <module>
    @asyncio.coroutine
E   AttributeError: module 'asyncio' has no attribute 'coroutine'. Did you mean: 'coroutines'?
""", ("python", ("older", "<3.11"), "stdlib-name-attribute"))

case("install", """\
         File "/root/.cache/uv/builds-v0/.tmp1/lib/python3.12/site-packages/pkg_resources/__init__.py", line 2191, in <module>
           register_finder(pkgutil.ImpImporter, find_on_path)
         AttributeError: module 'pkgutil' has no attribute 'ImpImporter'. Did you mean: 'zipimporter'?
""", ("python", ("older", "<3.12"), "stdlib-name-attribute"))

case("import", """\
A module that was compiled using NumPy 1.x cannot be run in
NumPy 2.0.0 as it may crash. To support both 1.x and 2.x
versions of NumPy, modules must be compiled with NumPy 2.0.
Some module may need to rebuild instead e.g. with 'pybind11>=2.12'.
""", ("pip", ("numpy<2",), "numpy2-abi"))

# pandas 1.5.3's wheel (built against NumPy 1) imported with NumPy 2.0 installed: Cython's type-size check
# (reconstructed from the frames of pandas 1.5.3 and the message reported with NumPy 2.0)
case("collect", """\
ImportError while loading conftest '/work/tests/conftest.py'.
tests/conftest.py:3: in <module>
    import pandas as pd
/opt/venv/lib/python3.11/site-packages/pandas/__init__.py:22: in <module>
    from pandas.compat import is_numpy_dev as _is_numpy_dev  # pyright: ignore # noqa:F401
/opt/venv/lib/python3.11/site-packages/pandas/compat/__init__.py:18: in <module>
    from pandas.compat.numpy import (
/opt/venv/lib/python3.11/site-packages/pandas/compat/numpy/__init__.py:4: in <module>
    from pandas.util.version import Version
/opt/venv/lib/python3.11/site-packages/pandas/util/__init__.py:2: in <module>
    from pandas.util._decorators import (  # noqa:F401
/opt/venv/lib/python3.11/site-packages/pandas/util/_decorators.py:14: in <module>
    from pandas._libs.properties import cache_readonly
/opt/venv/lib/python3.11/site-packages/pandas/_libs/__init__.py:13: in <module>
    from pandas._libs.interval import Interval
pandas/_libs/interval.pyx:1: in init pandas._libs.interval
    ???
E   ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject
""", ("pip", ("numpy<2",), "numpy-dtype-size"))

case("collect", """\
ImportError while loading conftest '/work/tests/conftest.py'.
tests/conftest.py:1: in <module>
    import factory_boy_helpers
E   ModuleNotFoundError: No module named 'factory_boy_helpers'
""", ("pip", ("factory_boy_helpers",), "runtime-missing-module"))

case("collect", """\
E   ModuleNotFoundError: No module named 'hypothesis'
E   ModuleNotFoundError: No module named 'yaml.constructor'
E   ModuleNotFoundError: No module named 'mypkg._version'
E   ModuleNotFoundError: No module named 'sklearn'
""", ("pip", ("hypothesis", "pyyaml", "scikit-learn"), "runtime-missing-module"), local={"mypkg"})

case("collect", """\
    raise PluginValidationError(
E   pluggy._manager.PluginValidationError: Plugin '/work/docopt/conftest.py' for hook 'pytest_collect_file'
E   hookimpl definition: pytest_collect_file(path, parent)
E   Argument(s) {'path'} are declared in the hookimpl but can not be found in the hookspec
""", ("pip", ("pytest<8",), "pytest-py-path-hooks"))  # docopt 0.6.2's conftest.py, pytest 9

case("collect", """\
ERROR  - Failed: Direct construction of conftest.DocoptTestFile has been deprecated, please use DocoptTestFile.from_parent.
See https://docs.pytest.org/en/stable/deprecations.html#node-construction-changed-to-node-from-parent for more details.
""", ("pip", ("pytest<6",), "pytest-direct-node-construction"))  # docopt 0.6.2 with pytest 7 on Python 3.6

case("install", """\
error: No solution found when resolving dependencies
  cause: Because types-pkg-resources<=0.1.2 was yanked (reason: Use types-setuptools instead) and only the following versions of types-pkg-resources are available:
             types-pkg-resources<=0.1.2
             types-pkg-resources==0.1.3
         we can conclude that all of:
             types-pkg-resources<0.1.3
             types-pkg-resources>0.1.3
          cannot be used.
         And because types-pkg-resources==0.1.3 was yanked (reason: Use types-setuptools instead) and you require types-pkg-resources, we can conclude that your requirements are unsatisfiable.
""", ("drop", ("types-pkg-resources",), "yanked-requirement"))  # hypothesis' requirements/tools.in

case("install", """\
   Building file:///work/docopt
error: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.build_editable` failed (exit status: 1)

         [stderr]
         Traceback (most recent call last):
           File "<string>", line 11, in <module>
         AttributeError: '_BuildMetaLegacyBackend' object has no attribute 'build_editable'
""", ("legacy_editable", (), "legacy-editable"))  # docopt on Python 3.6 (setuptools 59.6)

case("install", """\
Resolved 12 packages in 210ms
error: Failed to build `blist==1.3.6`
  Caused by: The build backend returned an error
  Caused by: Call to `setuptools.build_meta:__legacy__.build_wheel` failed (exit status: 1)
         subprocess.CalledProcessError: Command '['curl', 'https://pypi.python.org/packages/source/s/setuptools/setuptools-1.1.6.tar.gz', '--silent', '--output', 'setuptools-1.1.6.tar.gz']' returned non-zero exit status 6.

hint: Build failures usually indicate a problem with the package or the build environment
""", ("drop", ("blist",), "unbuildable-requirement"))  # sortedcontainers' requirements.txt (benchmarks only)

# ---- dependencies newer than the project ------------------------------------------------------------------

case("collect", """\
test_d.py:1: in <module>
    from jinja2 import escape
E   ImportError: cannot import name 'escape' from 'jinja2' (/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/jinja2/__init__.py)
""", ("cutoff", (), "cutoff-import-name"))

case("import", """\
  File "/opt/venv/lib/python3.11/site-packages/jinja2/filters.py", line 13, in <module>
    from markupsafe import soft_unicode
ImportError: cannot import name 'soft_unicode' from 'markupsafe' (/opt/venv/lib/python3.11/site-packages/markupsafe/__init__.py)
""", ("cutoff", (), "cutoff-import-name"))

case("collect", """\
test_e.py:2: in <module>
    X = np.float(1)
        ^^^^^^^^
/opt/venv/lib/python3.11/site-packages/numpy/__init__.py:775: in __getattr__
    raise AttributeError(__former_attrs__[attr], name=None)
E   AttributeError: module 'numpy' has no attribute 'float'.
E   `np.float` was a deprecated alias for the builtin `float`. To avoid this error in existing code, use `float` by itself.
""", ("cutoff", (), "cutoff-attribute"))

# ---- pytest configuration -----------------------------------------------------------------------------------

case("collect", """\
ERROR: usage: __main__.py [options] [file_or_dir] [file_or_dir] [...]
__main__.py: error: unrecognized arguments: --cov=mypkg --cov-report=term-missing -n4
  inifile: /work/pytest.ini
  rootdir: /work
""", ("pip", ("pytest-cov", "pytest-xdist"), "pytest-unknown-option"))

case("collect", """\
==================================== ERRORS ====================================
__________________________ ERROR collecting test_b.py __________________________
'asyncio' not found in `markers` configuration option
=========================== short test summary info ============================
ERROR test_b.py - Failed: 'asyncio' not found in `markers` configuration option
no tests collected, 1 error in 1.10s
""", ("pip", ("pytest-asyncio",), "pytest-unknown-marker"))

case("collect", """\
ERROR: Unknown config option: asyncio_mode
""", ("pip", ("pytest-asyncio",), "pytest-unknown-ini"))


# ---- tests ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage,output,expected,local,recognized,retried", CASES,
                         ids=[f"{i}-{c[2][0][2] if c[2] else c[4][0]}" for i, c in enumerate(CASES)])
def test_case(stage, output, expected, local, recognized, retried):
    fixes = diagnose(output, stage=stage, local=local, retried=retried)
    assert [(f.kind, f.args, f.rule) for f in fixes] == expected
    assert set(recognized) <= set(matching_rules(output, stage=stage, local=local))
    for f in fixes:
        assert "→" in f.why and "\n" not in f.why


def test_every_rule_has_a_case():
    covered = {rule for c in CASES for (_, _, rule) in c[2]} | {rule for c in CASES for rule in c[4]}
    assert covered == {r.id for r in rules()}


def test_interface():
    fix = diagnose("fatal error: ffi.h: No such file or directory", stage="install")[0]
    assert isinstance(fix, Fix) and hash(fix)
    assert fix.why == ("the build needs the C header ffi.h (fatal error: ffi.h: No such file or directory) "
                       "→ libffi-dev")
    with pytest.raises(ValueError):
        diagnose("", stage="build")


def test_stage_matters():
    header = "fatal error: ffi.h: No such file or directory"
    assert diagnose(header, stage="collect") == []
    missing = "E   ModuleNotFoundError: No module named 'requests'"
    assert [(f.kind, f.args) for f in diagnose(missing, stage="install")] == [("build_deps", ("requests",))]
    assert [(f.kind, f.args) for f in diagnose(missing, stage="collect")] == [("pip", ("requests",))]
    assert diagnose("Read timed out.", stage="collect") == []


def test_nothing_to_say():
    assert diagnose("", stage="install") == []
    compile_error = ("src/x.c:3:5: error: 'foo' undeclared (first use in this function)\n"
                     "error: command '/usr/bin/x86_64-linux-gnu-gcc' failed with exit code 1\n")
    assert diagnose(compile_error, stage="install") == []  # gcc ran: not a missing compiler
    unknown_header = "fatal error: vendor/thing.h: No such file or directory"
    assert diagnose(unknown_header, stage="install") == []
    circular = "ImportError: cannot import name 'App' from partially initialized module 'app' (most likely due to a circular import)"
    assert diagnose(circular, stage="import") == []
    # reconstructed: a dependency of a dependency that PyPI lacks is not the project's line to drop
    transitive = ("  cause: Because only pyfoo-bar<=0.2 is available and pyfoo-bar<=0.2 depends on alsa-utils, we\n"
                  "  can conclude that pyfoo-bar>0.1 cannot be used. And because alsa-utils was not found in the\n"
                  "  package registry and you require pyfoo-bar>0.1, we can conclude that your requirements are\n"
                  "  unsatisfiable.\n")
    assert diagnose(transitive, stage="install") == []
    # a URL requirement that was fetched and then failed to build is not replaced by the index's release
    built = ("error: Failed to download and build `foo @ git+https://example.org/foo.git@main`\n"
             "  cause: Build backend failed to build wheel through `build_wheel` (exit status: 1)\n")
    assert [f.rule for f in diagnose(built, stage="install")] == []


def test_a_network_failure_is_retried_before_a_url_requirement_is_replaced():
    """A host that does not resolve may be a passing failure: retried first (the retry rule hides the rest);
    once retried, the URL requirement that stays unreachable gets its fix."""
    output = ("error: Failed to download and build `h11 @ git+https://github.com/python-hyper/h11.git@master`\n"
              "  cause: Git operation failed\n"
              "         fatal: unable to access 'https://github.com/python-hyper/h11.git/': Could not resolve host\n")
    assert [f.rule for f in diagnose(output, stage="install")] == ["net-dns"]
    assert [f.rule for f in diagnose(output, stage="install", retried=True)] == ["unreachable-url-requirement"]
    assert diagnose("Temporary failure in name resolution", stage="install", retried=True) == []


def test_local_packages_are_not_fixed():
    local = frozenset({"mypkg", "parser"})
    assert diagnose("ModuleNotFoundError: No module named 'mypkg.sub'", stage="collect", local=local) == []
    assert diagnose("ModuleNotFoundError: No module named 'mypkg'", stage="install", local=local) == []
    assert diagnose("ModuleNotFoundError: No module named 'parser'", stage="collect", local=local) == []
    assert diagnose("ImportError: cannot import name 'helper' from 'mypkg.util' (/work/mypkg/util.py)",
                    stage="collect", local=local) == []
    assert diagnose("AttributeError: module 'mypkg' has no attribute 'VERSION'", stage="import", local=local) == []
    # a standard module is never fetched from PyPI and never "too new"
    assert diagnose("ImportError: cannot import name 'izip' from 'itertools' (unknown)", stage="collect") == []
    assert diagnose("ModuleNotFoundError: No module named 'sqlite3'", stage="collect") == []


def test_why_names_the_package_that_looks_too_new():
    out = "E   ImportError: cannot import name 'escape' from 'jinja2' (/opt/venv/lib/python3.11/site-packages/jinja2/__init__.py)"
    (fix,) = diagnose(out, stage="collect")
    assert fix.why.startswith("jinja2 looks newer than the project: it no longer has escape (")


def test_tables_are_well_formed():
    debian_name = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
    data = tomllib.loads(resources.files("envyard.data").joinpath("debian_packages.toml").read_text())
    for section, entries in data.items():
        for key, packages in entries.items():
            assert packages and all(debian_name.match(p) for p in packages), (section, key)
    assert len(data["header"]) >= 40
    for name, constraint in {**tables()["stdlib_module"], **tables()["stdlib_name"]}.items():
        assert re.fullmatch(r"(<|>=)3\.\d+", constraint), name


def test_the_project_itself_is_never_left_out_when_it_does_not_build():
    out = ("error: Failed to build `sortedcontainers @ file:///work/sortedcontainers`\n"
           "  Caused by: The build backend returned an error\n")
    assert [f for f in diagnose(out, stage="install") if f.rule == "unbuildable-requirement"] == []
