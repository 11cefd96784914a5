"""Whether a framework's operations implement a scenario's declared interface (a Protocol
of dlbench.scenarios.<scenario>_ops): every member present, every method callable the way
the scenario calls it. Checked by inspecting the class, without building it (tests run it
for every registered framework and scenario)."""

import inspect
from typing import Protocol

_NOT_MEMBERS = {"__init__", "__module__", "__qualname__", "__doc__", "__dict__",
                "__weakref__", "__annotations__", "__parameters__", "__orig_bases__",
                "__protocol_attrs__", "__non_callable_proto_members__", "__abstractmethods__",
                "__subclasshook__", "_is_protocol", "_is_runtime_protocol", "__slots__",
                "__firstlineno__", "__static_attributes__", "_abc_impl"}


def interface_members(interface: type) -> tuple[dict[str, inspect.Signature], set[str]]:
    """The interface's methods (name → signature) and its data members (names), its
    bases' included."""
    methods: dict[str, inspect.Signature] = {}
    data: set[str] = set()
    for cls in reversed(interface.__mro__):
        if cls in (object, Protocol) or not getattr(cls, "_is_protocol", False):
            continue
        data |= set(inspect.get_annotations(cls))
        for name, value in vars(cls).items():
            if name not in _NOT_MEMBERS and inspect.isfunction(value):
                methods[name] = inspect.signature(value)
    return methods, data - set(methods)


def problems(implementation: type, interface: type) -> list[str]:
    """What keeps `implementation` (a class) from implementing `interface`: a member it
    lacks, or a method that cannot be called as the interface declares it. Empty: none."""
    methods, data = interface_members(interface)
    found = []
    annotated = set()
    for cls in implementation.__mro__:
        annotated |= set(inspect.get_annotations(cls))
    for name in sorted(data):
        if not hasattr(implementation, name) and name not in annotated:
            found.append(f"{name}: missing (declare it on the class)")
    for name, wanted in sorted(methods.items()):
        member = inspect.getattr_static(implementation, name, None)
        if member is None:
            found.append(f"{name}(): missing")
        elif not callable(member):
            found.append(f"{name}: not a method")
        else:
            found += [f"{name}(): {p}" for p in _incompatible(inspect.signature(member), wanted)]
    return found


def _incompatible(actual: inspect.Signature, wanted: inspect.Signature) -> list[str]:
    """How a method's signature fails the interface's: each declared parameter, by name and
    position, with a default where the interface has one; extra parameters optional."""
    wanted_params = [p for p in wanted.parameters.values() if p.name != "self"]
    actual_params = [p for p in actual.parameters.values() if p.name != "self"]
    variadic = {p.kind for p in actual_params} & {inspect.Parameter.VAR_POSITIONAL,
                                                   inspect.Parameter.VAR_KEYWORD}
    if len(variadic) == 2:
        return []  # takes anything
    found = []
    for index, param in enumerate(wanted_params):
        if index >= len(actual_params) or actual_params[index].name != param.name:
            have = actual_params[index].name if index < len(actual_params) else "nothing"
            found.append(f"parameter {index + 1} is {have}, not {param.name}")
            continue
        if (param.default is not inspect.Parameter.empty
                and actual_params[index].default is inspect.Parameter.empty):
            found.append(f"{param.name} needs a default (the interface's may be left out)")
    for extra in actual_params[len(wanted_params):]:
        if extra.default is inspect.Parameter.empty and extra.kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            found.append(f"extra parameter {extra.name} needs a default")
    return found
