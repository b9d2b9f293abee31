"""The one error of CRD generation, so callers and tests can tell a bad model from a bug."""


class CRDGenerationError(ValueError):
    """A model cannot be rendered as a Kubernetes structural schema.

    The message names the JSON path of the offending schema node (``.status.conditions[*]``) and
    what is wrong with it, so the model to fix is found without reading the generator."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path or '<root>'}: {problem}")
        self.path = path
        self.problem = problem
