"""``manage.py lint_api_schema [--file PATH]``: the OpenAPI document is valid OpenAPI 3 and
keeps the API's own rules (:mod:`toolcalls.api.contract`); ``make lint`` runs it."""

from typing import Any

from django.core.management.base import CommandError, CommandParser
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from toolcalls.api.contract import contract_problems
from toolcalls.management.base import CallgateCommand


class Command(CallgateCommand):
    help = (
        "Check the API's OpenAPI document: valid OpenAPI 3 (openapi-spec-validator), and the "
        "API's rules (descriptions, every status in the one error shape, response headers, "
        "bounded parameters, a valid example for every request and response)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", help="also write the document here (JSON)")

    def handle(self, *args: Any, **options: Any) -> None:
        document = SchemaGenerator().get_schema(request=None, public=True)
        if options["file"]:
            try:
                with open(options["file"], "wb") as out:
                    out.write(OpenApiJsonRenderer().render(document, renderer_context={}))
            except OSError as exc:  # no such directory, not writable, a directory
                raise CommandError(f"cannot write {options['file']}: {exc.strerror}") from None
        try:
            validate(document)
        except OpenAPIValidationError as exc:
            raise CommandError(f"not valid OpenAPI 3: {exc.message}") from None
        problems = contract_problems(document)
        for problem in problems:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"{len(problems)} problems in the API document")
        operations = sum(len(item) for item in document["paths"].values())
        self.stdout.write(f"OK: {operations} operations, valid OpenAPI 3 and the API's rules")
