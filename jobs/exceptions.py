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
