"""Old public names kept for one release, each with a `DeprecationWarning` naming the new one."""

import warnings


def renamed_attributes(module_name, renames):
    """A module `__getattr__` that gives each renamed attribute's new object, with a warning.

    Args:
        module_name: the module's `__name__`.
        renames: `{old name: (new name, the object)}`.

    Returns:
        The function to assign to the module's `__getattr__`.
    """

    def __getattr__(name):
        if name in renames:
            new_name, value = renames[name]
            warnings.warn(
                f"`{module_name}.{name}` is deprecated and will be removed in the next release: "
                f"use `{module_name}.{new_name}`, which it is.",
                DeprecationWarning, stacklevel=2,
            )
            return value
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__
