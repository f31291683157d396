import Glibc

/// The named steps of the tools' multi-step commands (`share`, `configure --invitation`, `restore`,
/// …), where a test can stop the process as a crash, a Ctrl-C or a kill would.
///
/// A command calls `reached(_:)` between its steps (after one request or write, before the next).
/// Nothing happens unless the environment asks for it:
/// - `GROUPDEFAULTS_INTERRUPT_LOG=PATH`: each point reached is appended to `PATH`, one name per line,
///   so that a test learns every step a run of the command takes;
/// - `GROUPDEFAULTS_INTERRUPT_AT=NAME` (or `NAME@SIGINT`, `NAME@SIGTERM`): at the first point of that
///   name the process sends itself SIGKILL (a crash or a power cut, no handler runs), or the signal
///   named (a Ctrl-C, a `kill`: the command's handlers run).
///
/// The names are `command.step` (`share.invitation-made`); a test interrupts at every name the log
/// listed, one run each, and checks that the next run completes or undoes what was begun.
package enum InterruptionPoint {
    /// Marks that the command reached the step `name`.
    package static func reached(_ name: String) {
        if let log = environment("GROUPDEFAULTS_INTERRUPT_LOG") {
            let descriptor = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            if descriptor >= 0 {
                let line = Array((name + "\n").utf8)
                _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                close(descriptor)
            }
        }
        guard let target = environment("GROUPDEFAULTS_INTERRUPT_AT") else { return }
        let parts = target.split(separator: "@", maxSplits: 1).map(String.init)
        guard parts.first == name else { return }
        switch parts.count == 2 ? parts[1] : "SIGKILL" {
        case "SIGINT": deliverHere(SIGINT)
        case "SIGTERM": deliverHere(SIGTERM)
        default: kill(getpid(), SIGKILL)
        }
    }

    /// Sends `number` to the calling thread with it unblocked, so that it is handled (or ends the
    /// process) before this returns; then cancels the task that reached the step, as the handler's
    /// thread does a moment later: the step is where the signal lands, and the command's next
    /// request is not sent.
    private static func deliverHere(_ number: Int32) {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        var previous = sigset_t()
        pthread_sigmask(SIG_UNBLOCK, &set, &previous)
        raise(number)
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        withUnsafeCurrentTask { $0?.cancel() }
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let string = String(cString: value)
        return string.isEmpty ? nil : string
    }
}
