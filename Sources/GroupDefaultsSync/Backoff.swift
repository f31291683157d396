/// Exponential backoff with "equal jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"):
/// each wait is random between half a ceiling and the ceiling, which doubles from `initial` up to `maximum`; a
/// server's `Retry-After` is honoured when it asks for longer.
struct Backoff: Sendable {
    let initial: Duration
    let maximum: Duration
    private var ceiling: Duration

    init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = maximum
        ceiling = initial
    }

    /// The next wait, and the ceiling doubles.
    mutating func next(retryAfter: Duration? = nil) -> Duration {
        let milliseconds = Int64(ceiling.components.seconds) * 1000 + ceiling.components.attoseconds / 1_000_000_000_000_000
        let wait = Duration.milliseconds(Int64.random(in: (milliseconds / 2)...max(milliseconds / 2, milliseconds)))
        ceiling = min(ceiling * 2, maximum)
        guard let retryAfter else { return wait }
        return max(wait, min(retryAfter, maximum))
    }

    mutating func reset() { ceiling = initial }
}
