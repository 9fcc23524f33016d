"""Deprecated: the exporters' old positional forms, taken for one release (2026-11); goes with them.

Every exporter is now `export_*(model, export_dir, *, ...)`. Before, the
export directory was the 2nd, 3rd or 4th argument, and the arguments after
it positional.
"""

import functools
import os
import warnings


def _is_path(value):
    return isinstance(value, (str, os.PathLike))


def takes_old_call_form(*names):
    """Decorator: `exporter(model, export_dir, *, ...)` also takes its old form `exporter(*names)`.

    A call is in the old form when it gives more than two arguments by
    position, a second one that is not a path, or the old name of the first
    argument (`names[0]`) by keyword. It then works as before, with a
    `DeprecationWarning` that names the new form. Either way `export_dir`
    must be a path (a `TypeError` that names it otherwise).

    Args:
        names: the exporter's old parameters in their old order, e.g.
            `("backbone", "preprocessor", "export_dir", "version", ...)`.
    """

    def decorate(exporter):
        new_form = f"`{exporter.__name__}(model, export_dir, ...)`"

        @functools.wraps(exporter)
        def call(*args, **kwargs):
            second_is_path = len(args) > 1 and _is_path(args[1])
            old = len(args) > 2 or (len(args) == 2 and not second_is_path) or (
                names[0] != "model" and names[0] in kwargs)
            if old and second_is_path and names[1] != "export_dir":
                raise TypeError(f"With the export directory second, {new_form}, give the other "
                                "arguments by keyword.")
            given = _old_names_given(exporter.__name__, names, args, kwargs) if old else ()
            if old:
                args, kwargs = (), _new_keywords(names, args, kwargs)
            directory = args[1] if len(args) > 1 else kwargs.get("export_dir")
            if directory is not None and not _is_path(directory):
                raise TypeError(f"`export_dir` must be a directory path, got "
                                f"{type(directory).__name__}: call {new_form}, the other "
                                "arguments by keyword.")
            if old:
                moved = "".join(f", {name}=..." for name in given[1:] if name != "export_dir")
                warnings.warn(
                    f"`{exporter.__name__}({', '.join(given)})` is deprecated and will be removed "
                    f"in the next release: call `{exporter.__name__}(model, export_dir{moved})`, "
                    "everything after `export_dir` by keyword.",
                    DeprecationWarning, stacklevel=2,
                )
            return exporter(*args, **kwargs)

        call.old_call_form = names  # for the tests: the same rule around a recorder
        return call

    return decorate


def _old_names_given(function, names, args, kwargs):
    """The old names of the arguments given by position, and of the first if given by keyword."""
    if len(args) > len(names):
        raise TypeError(f"{function}() takes at most {len(names)} positional arguments "
                        f"({len(args)} given).")
    given = list(names[:len(args)])
    for name in given:
        if name in kwargs:
            raise TypeError(f"{function}() got multiple values for argument '{name}'.")
    if names[0] in kwargs and not args:
        given.insert(0, names[0])
    return given


def _new_keywords(names, args, kwargs):
    """`args` and `kwargs` as keyword arguments of the new form."""
    keywords = {**dict(zip(names[:len(args)], args, strict=True)), **kwargs}
    if names[0] != "model":
        keywords["model"] = keywords.pop(names[0])
    return keywords
