"""Where the query goes into a Haystack component or pipeline, and where its documents come out.

A socket is named ``"socket"`` on a component and ``"component.socket"`` on a pipeline. Everything is checked
against the object's own sockets when the retriever is made, so a wrong name is an ``EvretError`` naming the option
and listing what the object has, before any query runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.sdk import EvretError

OWNER = "haystack retriever"
TEXT_SOCKETS = ("query", "text")  # the sockets a query text goes to when option 'query_input' is not given
VECTOR_SOCKET = "query_embedding"  # an embedding retriever's input, when nothing in front of it embeds the query

Address = tuple[str | None, str]  # (component name in a pipeline or None for a lone component, socket name)


def is_haystack_object(obj: Any) -> bool:
    """True for a Haystack pipeline or component (``@component`` classes get Haystack's metaclass), decided without
    importing haystack."""
    for cls in (*type(obj).__mro__, type(type(obj))):
        module = getattr(cls, "__module__", "") or ""
        if module == "haystack" or module.startswith(("haystack.", "haystack_integrations.")):
            return True
    return False


def _sockets(sockets: Any) -> dict[str, Any]:
    """A component's input or output sockets by name (Haystack keeps them as attributes of a ``Sockets``)."""
    return {name: socket for name, socket in vars(sockets).items() if not name.startswith("_")}


def _label(address: Address) -> str:
    return address[1] if address[0] is None else f"{address[0]}.{address[1]}"


def _listing(table: Mapping[str | None, Mapping[str, Any]]) -> str:
    names = [_label((comp, socket)) for comp, sockets in table.items() for socket in sockets]
    return ", ".join(names) or "none"


def _is_vector_socket(name: str, info: Mapping[str, Any]) -> bool:
    return name.endswith("embedding") or info.get("type") == list[float]


class Wiring:
    """The sockets of one Haystack object: the query inputs (text or vector), the ``top_k`` input that gets ``k``,
    fixed inputs (``filters``, option ``inputs``) and the output holding the documents; it builds each run's
    input and reads the documents from its output."""

    def __init__(
        self,
        obj: Any,
        query_input: str | Sequence[str] | None,
        documents_output: str | None,
        top_k_input: str | None,
        filters: Mapping[str, Any] | None,
        inputs: Mapping[str, Any] | None,
    ) -> None:
        import haystack

        # Haystack 3 has one Pipeline (run and run_async); Haystack 2 also has AsyncPipeline
        pipelines = tuple(c for c in (getattr(haystack, n, None) for n in ("Pipeline", "AsyncPipeline")) if c)
        self.obj = obj
        self.is_pipeline = isinstance(obj, pipelines)
        if not self.is_pipeline and not (hasattr(obj, "__haystack_input__") and callable(getattr(obj, "run", None))):
            raise EvretError(f"{OWNER}: expected a Haystack component or Pipeline, got {type(obj).__name__}")
        self.what = "pipeline" if self.is_pipeline else f"component {type(obj).__name__}"
        self.open = self._open_inputs()
        self.output = self._documents_output(documents_output)
        self.query_sockets = self._query_inputs(query_input)
        self.vector_sockets = [a for a in self.query_sockets if _is_vector_socket(a[1], self.open[a[0]][a[1]])]
        self.top_k = self._top_k_input(top_k_input)
        self.fixed: dict[Address, Any] = {}
        for address, value in self._inputs(inputs).items():
            self.fixed[address] = value
        if filters is not None:
            self.fixed[self._filters_input()] = dict(filters)
        self._check_mandatory()
        self.has_async = callable(getattr(obj, "run_async", None))
        self._warm = self.is_pipeline  # Pipeline.run warms its components up itself

    # -- the object's sockets ----------------------------------------------------------------------------------
    def _open_inputs(self) -> dict[str | None, dict[str, dict[str, Any]]]:
        """The inputs a run may be given: ``{component or None: {socket: {"type", "is_mandatory"}}}``."""
        if self.is_pipeline:
            return dict(self.obj.inputs())
        return {None: {name: {"type": s.type, "is_mandatory": s.is_mandatory}
                       for name, s in _sockets(self.obj.__haystack_input__).items()}}

    def _outputs(self) -> dict[str | None, dict[str, Any]]:
        if self.is_pipeline:
            return dict(self.obj.outputs(include_components_with_connected_outputs=True))
        return {None: _sockets(self.obj.__haystack_output__)}

    def _address(self, spec: Any, option: str) -> Address:
        if not isinstance(spec, str) or not spec:
            raise EvretError(f"{OWNER}: option {option!r} must be a socket name, got {spec!r}")
        if not self.is_pipeline:
            return None, spec
        comp, sep, socket = spec.rpartition(".")
        if not sep or not comp or not socket:
            raise EvretError(f"{OWNER}: option {option!r} {spec!r}: name a pipeline socket as 'component.socket'")
        return comp, socket

    def _open_address(self, spec: Any, option: str) -> Address:
        address = self._address(spec, option)
        if address[1] not in self.open.get(address[0], {}):
            raise EvretError(f"{OWNER}: option {option!r} {spec!r} is not an input of the {self.what} that a run can "
                             f"be given; its open inputs are {_listing(self.open)}")
        return address

    def _documents_output(self, spec: str | None) -> Address:
        outputs = self._outputs()
        if spec is not None:
            address = self._address(spec, "documents_output")
            if address[1] not in outputs.get(address[0], {}):
                raise EvretError(f"{OWNER}: option 'documents_output' {spec!r} is not an output of the {self.what}; "
                                 f"its outputs are {_listing(outputs)}")
            return address
        found = [(comp, "documents") for comp, sockets in outputs.items() if "documents" in sockets]
        if self.is_pipeline and len(found) > 1:  # a retriever feeding a ranker: the documents that feed nothing
            unconnected = self.obj.outputs()
            found = [address for address in found if "documents" in unconnected.get(address[0], {})] or found
        if len(found) != 1:
            raise EvretError(f"{OWNER}: the {self.what} has {'no' if not found else len(found)} 'documents' outputs "
                             f"({', '.join(map(_label, found)) or 'its outputs are ' + _listing(outputs)}); "
                             f"set option 'documents_output'")
        return found[0]

    def _query_inputs(self, spec: str | Sequence[str] | None) -> list[Address]:
        if spec is not None:
            specs = [spec] if isinstance(spec, str) else list(spec)
            if not specs:
                raise EvretError(f"{OWNER}: option 'query_input' names no socket")
            return [self._open_address(s, "query_input") for s in specs]
        mandatory = [(comp, name) for comp, sockets in self.open.items() for name, info in sockets.items()
                     if info["is_mandatory"]]
        found = ([a for a in mandatory if a[1] in TEXT_SOCKETS]
                 or [a for a in mandatory if a[1] == VECTOR_SOCKET])
        if not found:
            raise EvretError(f"{OWNER}: the {self.what} has no open input named {' or '.join(TEXT_SOCKETS)} for "
                             f"the query; set option 'query_input' to one of {_listing(self.open)}")
        return found

    def _top_k_input(self, spec: str | None) -> Address | None:
        if spec == "":
            return None  # asked not to pass k: results are cut to k (and must be at least k)
        if spec is not None:
            return self._open_address(spec, "top_k_input")
        address = (self.output[0], "top_k")
        return address if "top_k" in self.open.get(address[0], {}) else None

    def _filters_input(self) -> Address:
        takers = [comp for comp, sockets in self.open.items() if "filters" in sockets]
        comp = self.output[0] if self.output[0] in takers else takers[0] if len(takers) == 1 else "?"
        if comp == "?":
            raise EvretError(f"{OWNER}: option 'filters': the {self.what} has "
                             f"{'no' if not takers else len(takers)} open 'filters' inputs "
                             f"({', '.join(str(c) for c in takers) or 'none'}); pass filters through option 'inputs' "
                             f"as {{component: {{'filters': ...}}}}")
        return comp, "filters"

    def _inputs(self, inputs: Mapping[str, Any] | None) -> dict[Address, Any]:
        if inputs is None:
            return {}
        if not isinstance(inputs, Mapping):
            raise EvretError(f"{OWNER}: option 'inputs' must be a mapping, got {type(inputs).__name__}")
        if not self.is_pipeline:
            return {self._open_address(name, "inputs"): value for name, value in inputs.items()}
        fixed: dict[Address, Any] = {}
        for comp, sockets in inputs.items():
            if not isinstance(sockets, Mapping):
                raise EvretError(f"{OWNER}: option 'inputs' of a pipeline is {{component: {{socket: value}}}}; "
                                 f"{comp!r} maps to a {type(sockets).__name__}")
            for name, value in sockets.items():
                fixed[self._open_address(f"{comp}.{name}", "inputs")] = value
        return fixed

    def _check_mandatory(self) -> None:
        given = {*self.query_sockets, *self.fixed}
        missing = [(comp, name) for comp, sockets in self.open.items() for name, info in sockets.items()
                   if info["is_mandatory"] and (comp, name) not in given]
        if missing:
            raise EvretError(f"{OWNER}: the {self.what} needs {', '.join(map(_label, missing))} as well as the query "
                             f"({', '.join(map(_label, self.query_sockets))}); give it through option 'inputs', or "
                             f"name it in option 'query_input' when it is the query")

    # -- running -----------------------------------------------------------------------------------------------
    def payload(self, query: str, vector: list[float] | None, k: int) -> dict[str, Any]:
        """One run's input: ``run(**payload)`` of a component, ``run(payload)`` of a pipeline."""
        values: dict[Address, Any] = dict(self.fixed)
        for address in self.query_sockets:
            values[address] = vector if address in self.vector_sockets else query
        if self.top_k is not None:
            values[self.top_k] = k
        if not self.is_pipeline:
            return {socket: value for (_, socket), value in values.items()}
        data: dict[str, Any] = {}
        for (comp, socket), value in values.items():
            data.setdefault(str(comp), {})[socket] = value
        return data

    def _warm_up(self) -> None:
        if not self._warm:
            warm_up = getattr(self.obj, "warm_up", None)
            if callable(warm_up):
                warm_up()
            self._warm = True

    def run(self, payload: dict[str, Any]) -> Any:
        self._warm_up()
        if self.is_pipeline:
            return self.obj.run(payload, include_outputs_from={self.output[0]})
        return self.obj.run(**payload)

    async def arun(self, payload: dict[str, Any]) -> Any:
        self._warm_up()
        if self.is_pipeline:
            return await self.obj.run_async(payload, include_outputs_from={self.output[0]})
        return await self.obj.run_async(**payload)

    def documents(self, result: Any, query: str) -> list[Any]:
        """The documents of one run's ``result``."""
        comp, socket = self.output
        block = result if comp is None else (result or {}).get(comp)
        docs = block.get(socket) if isinstance(block, Mapping) else None
        if docs is None:
            raise EvretError(f"{OWNER}: the {self.what} gave no {_label(self.output)!r} (option 'documents_output') "
                             f"for query {query[:60]!r}; the run returned {sorted(result or {})}")
        if not isinstance(docs, list) or any(not hasattr(d, "content") or not hasattr(d, "meta") for d in docs):
            raise EvretError(f"{OWNER}: {_label(self.output)!r} (option 'documents_output') of the {self.what} is "
                             f"not a list of Haystack Documents")
        return docs

    def describe(self) -> dict[str, Any]:
        """What the retriever's config records about the wiring."""
        return {
            "query_input": [_label(a) for a in self.query_sockets],
            "documents_output": _label(self.output),
            "top_k_input": None if self.top_k is None else _label(self.top_k),
            "inputs": sorted(_label(a) for a in self.fixed),
        }
