from kernel.errors import ConflictError, NotFoundError


class JobNotFoundError(NotFoundError):
    code = "jobNotFound"
    default_message = "Job not found."


class JobFinishedError(ConflictError):
    code = "jobFinished"
    default_message = "The job has already finished."


class JobNotCancellableError(ConflictError):
    code = "jobNotCancellable"
    default_message = "The job cannot be cancelled at this point."


class PoisonStepError(Exception):
    """A step whose claim expired `JOBS_MAX_DELIVERIES` times (its worker died each time, SPEC
    §11.1): it is not run again but ended as an unexpected failure."""

    def __init__(self, expired_claims: int) -> None:
        super().__init__(f"the step's claim expired {expired_claims} times; not run again")
        self.expired_claims = expired_claims
