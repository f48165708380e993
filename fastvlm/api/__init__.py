"""An OpenAI-compatible HTTP API on the engine, to serve beside the Gradio app (see docs/api.md).

Importing this package needs FastAPI and Starlette (both come with Gradio); nothing here loads a model.
"""

from .errors import ApiError
from .routes import build_router, mount_api
from .security import UnsafeBindError, api_key_dependency, check_bind, is_loopback
from .settings import ApiSettings
from .streaming import Gate

__all__ = ["ApiError", "ApiSettings", "Gate", "UnsafeBindError", "api_key_dependency", "build_router", "check_bind",
           "is_loopback", "mount_api"]
