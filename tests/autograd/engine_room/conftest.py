"""The engine room's own tests need the engine room: deleted, they are skipped (saying why)."""
import pytest

from tests.helpers import ENGINE_ROOM, ENGINE_ROOM_ABSENT

if not ENGINE_ROOM:
    pytest.skip(ENGINE_ROOM_ABSENT, allow_module_level=True)
