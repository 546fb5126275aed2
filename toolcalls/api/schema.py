"""OpenAPI description of API-key authentication (drf-spectacular extension), and the hook
that states every request body's strictness."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "toolcalls.api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key `cg_<prefix>_<secret>`, bound to one tenant and its scopes.",
        }


def strict_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every component used as a request body takes no
    other properties (``additionalProperties: false``), as ``StrictSerializer`` enforces."""
    schemas = result.get("components", {}).get("schemas", {})
    for path in result.get("paths", {}).values():
        for operation in path.values():
            body = operation.get("requestBody", {}) if isinstance(operation, dict) else {}
            for media in body.get("content", {}).values():
                ref = media.get("schema", {}).get("$ref", "")
                name = ref.rsplit("/", 1)[-1]
                if name in schemas:
                    schemas[name]["additionalProperties"] = False
    return result
