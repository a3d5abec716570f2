"""autograd.Function (being written)."""


class FunctionCtx:
    pass


class Function:
    @classmethod
    def apply(cls, *args, **kwargs):
        raise NotImplementedError("arrayad.autograd.Function is not implemented yet")


def once_differentiable(fn):
    return fn
