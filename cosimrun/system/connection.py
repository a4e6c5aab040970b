"""Connections between ports and their compiled, pint-free form."""

from __future__ import annotations

from dataclasses import dataclass

from cosimrun.core.ports import PortState
from cosimrun.core.units import UnitConversion


def split_port_path(path: str, *, what: str = "port") -> tuple[str, str]:
    """Split ``"comp.port"`` at the first dot; a clear ``ValueError`` otherwise."""
    if not isinstance(path, str) or "." not in path:
        raise ValueError(f"{what} {path!r} must be written 'component.port'")
    comp, port = path.split(".", 1)
    if not comp or not port:
        raise ValueError(f"{what} {path!r} must be written 'component.port'")
    return comp.strip(), port.strip()


@dataclass(frozen=True, slots=True)
class Connection:
    """A directed link from an output port to an input port."""

    src_component: str
    src_port: str
    dst_component: str
    dst_port: str

    @classmethod
    def between(cls, src: str, dst: str) -> Connection:
        """Build from ``"a.y"`` and ``"b.u"``."""
        sc, sp = split_port_path(src, what="connection source")
        dc, dp = split_port_path(dst, what="connection destination")
        return cls(sc, sp, dc, dp)

    @classmethod
    def parse(cls, text: str) -> Connection:
        """Build from ``"a.y -> b.u"``."""
        if not isinstance(text, str) or text.count("->") != 1:
            raise ValueError(f"connection {text!r} must be written 'src.port -> dst.port'")
        src, dst = (part.strip() for part in text.split("->"))
        return cls.between(src, dst)

    @property
    def src(self) -> str:
        return f"{self.src_component}.{self.src_port}"

    @property
    def dst(self) -> str:
        return f"{self.dst_component}.{self.dst_port}"

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


@dataclass(slots=True)
class Link:
    """A connection bound to live port states, with its compiled unit conversion."""

    connection: Connection
    src: PortState
    dst: PortState
    conversion: UnitConversion

    def transfer(self) -> None:
        """Copy the source value into the destination, converting units."""
        c = self.conversion
        self.dst.value = c.scale * self.src.value + c.offset if not c.is_identity else self.src.value
