"""Row values in failure texts: Spark's, Python's and Arrow's error messages quote the value that failed (a string
that did not cast, a duplicated map key, a row that broke a constraint, a `Row(...)` in a `foreachBatch` error), and
those are other people's data. `/status` serves failure texts without them unless the config asks
(`http.status_row_values`).

`without_row_values(text)` replaces each value with `ROW_VALUE` by what it is, not by the message it is in:

- **Spark's error conditions, from Spark's own templates.** A text `[CLASS.SUB] ...` is matched against that class's
  message template, read from the installed PySpark (`error/error-conditions.json` in Spark's `spark-common-utils`
  jar, and PySpark's own `pyspark/errors/error-conditions.json`): each parameter is masked unless its name says it
  is safe to show (`SAFE_PARAMETERS`: the last word of the name is a type, a name, a config, a column, a mode, ...:
  `<sourceType>`, `<functionName>`, `<ansiConfig>`) and it does not touch another parameter. So a value is masked
  in every condition Spark has, including ones this module never heard of (`<expression>` in CAST_INVALID_INPUT,
  `<value>` in INVALID_TYPED_LITERAL, `<key>` in DUPLICATED_MAP_KEY, `<url>`, `<input>`, `<errorMessage>` of
  `raise_error`). The template's own text, the error class and SQLSTATE stay. A message cut short (Spark bounds
  some failure texts) has the parameters it still holds masked.
- **Everything else, by how values are quoted**: every single-quoted literal (`'...'`: SQL string literals, Python
  reprs, `DATE '...'`; an apostrophe inside a word is not one), every double-quoted one (`For input string: "..."`)
  except a SQL type name (`"STRING"`, `"DECIMAL(10,2)"`, `"ARRAY<INT>"`), a Spark config key (`"spark.sql..."`) and
  the file of a Python traceback's frame (`File "..."`), and the inside of every `Row(...)`. Backticked identifiers
  are kept.
- **The few forms that quote a value bare, or quote one that may look like a type** (`BARE_FORMS`): the JDK's
  `For input string: "..."` and `Text ... could not be parsed`, Python's
  `invalid literal for int() with base 10: ...` and `could not convert string to float: ...`, Arrow's
  `Could not convert ... with type`, and the lines of Spark's CHECK_CONSTRAINT_VIOLATION (its values span lines).

What is left of a message says what failed (the error class, the types, the column, the stack). `without_row_values_in(
document)` does it to every string of a JSON-like document.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: What a row value is replaced with.
ROW_VALUE = "<row value>"
#: A template parameter is shown when the last word of its name (camel case) is one of these: it names a type, a
#: config, a schema object, a mode or a place, never a value. Every other parameter is masked.
SAFE_PARAMETERS = frozenset({
    "type", "types", "typ", "tpe", "config", "conf", "configs", "function", "func", "name", "names", "column",
    "columns", "col", "cols", "table", "field", "fields", "ident", "identifier", "class", "cls", "clazz", "schema",
    "option", "options", "operator", "state", "sqlstate", "docroot", "hint", "alternative", "suggestion", "mode",
    "version", "provider", "catalog", "namespace", "database", "db", "location", "path", "format", "precision",
    "scale", "operation", "action",
})
# A value as messages quote it: a SQL string literal ('...' with \' escapes, perhaps typed: DATE '...'), a double-quoted
# string, a Python repr, or a bare token (123L, 1.5E10D, NULL).
_VALUE = r"""(?:[A-Z]+ )?'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|b'(?:[^'\\\n]|\\.)*'|[^\s,()]+"""
BARE_FORMS = tuple(re.compile(form, re.MULTILINE) for form in (
    r"\bviolated by row with values:(?P<value>(?:\n - [^\n]*)+| [^\n]+)",
    rf"\bFor input string: (?P<value>{_VALUE})",
    rf"\bText (?P<value>{_VALUE}) could not be parsed",
    rf"\binvalid literal for \w+\(\) with base \d+: (?P<value>{_VALUE})",
    rf"\bcould not convert string to \w+: (?P<value>{_VALUE})",
    rf"\bCould not convert (?P<value>{_VALUE}) with type",
))
_SINGLE_QUOTED = re.compile(r"(?<![\w'])b?'(?:[^'\\\n]|\\.)*'(?![\w'])")
_DOUBLE_QUOTED = re.compile(r'(?P<file>\bFile )?"(?P<inside>(?:[^"\\\n]|\\.)*)"')
# What a double-quoted text may be and stay: a SQL type as Spark's `toSQLType` writes it, or a Spark config key
# (`toSQLConf`). Any other word in capitals may be a value.
_SQL_TYPE = (r"(?:STRING|BOOLEAN|TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DATE|TIMESTAMP(?:_NTZ|_LTZ)?|BINARY|VOID"
             r"|VARIANT|NULL|(?:DECIMAL|CHAR|VARCHAR|TIME)(?:\(\d+(?:,\s*\d+)?\))?|INTERVAL(?: [A-Z ]+)?"
             r"|(?:ARRAY|MAP|STRUCT)<.*>)")
_SAFE_QUOTED = re.compile(rf"{_SQL_TYPE}|spark\.[\w.-]+")
_ROW = re.compile(r"\bRow\(")
_ERROR_CLASS = re.compile(r"\[(?P<name>[A-Z_][A-Z0-9_]*(?:\.[A-Z][A-Z0-9_]*)*)\] ")
_PARAMETER = re.compile(r"<(\w+)>")
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# A template's end: the SQLSTATE Spark appends, or the end of its line.
_TEMPLATE_END = r"(?=\s+SQLSTATE: |\s*$)"
# A parameter's value: the shortest run of a line's characters that lets the rest match, never Spark's SQLSTATE.
_PARAMETER_VALUE = r"(?:(?!SQLSTATE: ).)*?"


def without_row_values(text: str) -> str:
    """`text` with every row value masked as `ROW_VALUE` (module docstring)."""
    for form in BARE_FORMS:
        text = form.sub(_masked, text)
    parts, at = [], 0
    for tag in _ERROR_CLASS.finditer(text):
        template = _template(tag.group("name")) if tag.start() >= at else None
        found = template.match(text, tag.end()) if template else None
        if found is None:
            continue
        parts += [_quoted_values_masked(text[at:tag.end()]), _parameters_masked(found)]
        at = found.end()
    return "".join(parts) + _quoted_values_masked(text[at:])


def _parameters_masked(found: re.Match[str]) -> str:
    """A template's match with each parameter that is not safe to show masked, its own text as it was."""
    parts, at = [], found.start()
    for group, name in found.re.groupindex.items():
        start, end = found.span(name)
        if start < 0:
            continue  # the text ends before this parameter
        shown = group.startswith("show") or start == end
        parts += [found.string[at:start], found.string[start:end] if shown else ROW_VALUE]
        at = end
    return "".join(parts) + found.string[at:found.end()]


def _is_safe_parameter(name: str) -> bool:
    words = _WORDS.findall(name)
    return bool(words) and words[-1].lower() in SAFE_PARAMETERS


def _quoted_values_masked(text: str) -> str:
    text = _SINGLE_QUOTED.sub(ROW_VALUE, text)
    text = _DOUBLE_QUOTED.sub(_double_quoted, text)
    return _without_rows(text)


def _double_quoted(match: re.Match[str]) -> str:
    if match.group("file") or _SAFE_QUOTED.fullmatch(match.group("inside")):
        return match.group()
    return f'"{ROW_VALUE}"'


def _masked(match: re.Match[str]) -> str:
    start, end = match.span("value")
    return match.string[match.start():start] + ROW_VALUE + match.string[end:match.end()]


def _without_rows(text: str) -> str:
    """Each `Row(...)` as `Row(<row value>)`; its inside runs to the matching parenthesis (or the end of the line)."""
    parts, at = [], 0
    for match in _ROW.finditer(text):
        if match.start() < at:
            continue  # a Row(...) inside one already replaced
        depth, end = 1, match.end()
        while end < len(text) and depth and text[end] != "\n":
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        parts += [text[at:match.end()], ROW_VALUE + (")" if depth == 0 else "")]
        at = end
    return "".join(parts) + text[at:]


@functools.lru_cache(maxsize=1024)  # bounded: the tags come from failure texts
def _template(error_class: str) -> re.Pattern[str] | None:
    """The expression matching the message of `error_class` (`CLASS` or `CLASS.SUB`) as Spark renders it: the main
    message, then the sub-condition's after a space; each parameter a named group `show<i>_<name>` or
    `mask<i>_<name>`. None when the installed Spark does not know the class."""
    main, _, sub = error_class.partition(".")
    condition = spark_error_conditions().get(main)
    if condition is None or (sub and sub not in condition.get("subClass", {})):
        return None
    message = "\n".join(condition.get("message", []))
    if sub:
        message += " " + "\n".join(condition["subClass"][sub].get("message", []))
    pieces = _PARAMETER.split(message)
    # A parameter is shown when its name says it is safe and it stands apart: where two touch (`<msg><hint>`), no one
    # can tell where one ends, and both are masked.
    for i in range(1, len(pieces), 2):
        alone = (i == 1 or pieces[i - 1]) and (i == len(pieces) - 2 or pieces[i + 1])
        pieces[i] = f"{'show' if alone and _is_safe_parameter(pieces[i]) else 'mask'}{i}_{pieces[i]}"
    # From the end: each parameter is followed by the rest of the template, or by the end of a text cut short (Spark
    # bounds some failure texts), so that a truncated message still has its values masked.
    pattern = _literal(pieces[-1]) + _TEMPLATE_END
    for i in range(len(pieces) - 2, 0, -2):
        pattern = rf"{_literal(pieces[i - 1])}(?P<{pieces[i]}>{_PARAMETER_VALUE})(?:{pattern}|\Z)"
    return re.compile(pattern, re.MULTILINE)


def _literal(text: str) -> str:
    return r"\s+".join(map(re.escape, re.split(r"\s+", text)))


@functools.cache
def spark_error_conditions() -> dict[str, Any]:
    """Spark's error conditions (`error-conditions.json`) from the installed PySpark, the JVM's and PySpark's own
    merged; empty when PySpark is not installed."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return {}
    conditions: dict[str, Any] = {}
    for text in _condition_files(Path(next(iter(spec.submodule_search_locations)))):
        conditions.update(json.loads(text))
    return conditions


def _condition_files(pyspark: Path) -> Iterator[str]:
    for jar in sorted((pyspark / "jars").glob("spark-common-utils_*.jar")):
        with zipfile.ZipFile(jar) as archive:
            yield archive.read("error/error-conditions.json").decode()
    own = pyspark / "errors" / "error-conditions.json"
    if own.is_file():
        yield own.read_text()


def without_row_values_in(document: Any) -> Any:
    """`document` (JSON-like) with `without_row_values` applied to every string, in new containers."""
    if isinstance(document, str):
        return without_row_values(document)
    if isinstance(document, Mapping):
        return {key: without_row_values_in(value) for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [without_row_values_in(item) for item in document]
    return document
