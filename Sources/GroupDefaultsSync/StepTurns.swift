import Synchronization

/// One step of each kind at a time in an engine: pushes run one after another (one in-flight
/// batch), and so do pulls (the cursor only advances). A step waits its turn, first come first
/// served, and hands it on when it leaves.
final class StepTurns: Sendable {
    /// What takes turns.
    enum Step { case push, pull }

    private struct State {
        var busy: Set<Step> = []
        var waiting: [Step: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let state = Mutex(State())

    /// Waits until no other `step` runs; then this one does, until `leave`.
    func enter(_ step: Step) async {
        await withCheckedContinuation { turn in
            let now = state.withLock { state in
                guard state.busy.contains(step) else {
                    state.busy.insert(step)
                    return true
                }
                state.waiting[step, default: []].append(turn)
                return false
            }
            if now { turn.resume() }
        }
    }

    /// Ends this `step`: the next one waiting runs.
    func leave(_ step: Step) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.waiting[step]?.isEmpty == false else {
                state.busy.remove(step)
                return nil
            }
            return state.waiting[step]!.removeFirst()
        }
        next?.resume()
    }
}
