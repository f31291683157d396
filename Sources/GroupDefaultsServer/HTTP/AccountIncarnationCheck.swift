import GroupDefaultsWire
import Hummingbird
import Synchronization

/// The rule of an account's incarnation on the wire, for one request of the token group: the
/// incarnation the request names (`Account-Incarnation`, what its device remembers of the suite's
/// owner) must be the owner's, else the request is 410 `account_deleted` before anything is read or
/// written; and the answer names the owner's (`AccountIncarnationMiddleware`). `SuiteAccess.check`
/// calls `check(owner:)` once it knows the owner and that the token may use the suite, so that no
/// token learns, or makes, the incarnation of an account whose suite it may not use.
package final class AccountIncarnationCheck: Sendable {
    let incarnations: AccountIncarnations
    /// What the request's `Account-Incarnation` header names; nil when it names none (a device
    /// that has not learnt one yet, or a client that does not send it: nothing to check).
    let claimed: String?
    /// The owner's incarnation, once checked: the answer's header.
    let answered = Mutex<String?>(nil)
    /// The owner's incarnation the request was checked against; nil before `check(owner:)`.
    var checkedIncarnation: String? { answered.withLock { $0 } }

    init(incarnations: AccountIncarnations, claimed: String?) {
        self.incarnations = incarnations
        self.claimed = claimed
    }

    /// Checks that the request's incarnation, if it names one, is `owner`'s, and keeps `owner`'s
    /// for the answer.
    func check(owner: String) async throws {
        let current = try await incarnations.incarnation(of: owner)
        answered.withLock { $0 = current }
        guard let claimed, claimed != current else { return }
        throw APIError(
            .accountDeleted,
            "the account \(owner) this device synced with was deleted, and \(owner) is now a new account: "
                + "this device's copy of the suite is the deleted account's, and is not taken into the new one"
        )
    }
}

/// Accounts' incarnations as `AccountStore.accountIncarnation` gives them, cached under the token
/// generation they were read under (`TokenStore.tokenGeneration`: a delete or a new token of any
/// process moves it on, so an entry never outlives the incarnation it holds). Bounded: when full it
/// starts afresh. Nothing is cached when the backend cannot tell the generation.
final class AccountIncarnations: Sendable {
    let storage: any AccountStore & TokenStore
    let capacity: Int
    private let entries = Mutex<[ExactName: (id: String, generation: UInt64)]>([:])

    init(storage: any AccountStore & TokenStore, capacity: Int = 10_000) {
        self.storage = storage
        self.capacity = capacity
    }

    /// `account`'s incarnation (made if it has none: an account of a store from before them).
    func incarnation(of account: String) async throws -> String {
        let generation = try? storage.tokenGeneration()
        let name = account.exact
        if let generation, let held = entries.withLock({ $0[name] }), held.generation == generation { return held.id }
        let id = try await storage.accountIncarnation(account)
        if let generation {
            entries.withLock { entries in
                if entries.count >= capacity && entries[name] == nil { entries.removeAll(keepingCapacity: true) }
                entries[name] = (id, generation)
            }
        }
        return id
    }
}

/// Gives each request of the token group its `AccountIncarnationCheck` (in its context), and adds
/// the owner's incarnation that the check found to the answer, as the `Account-Incarnation` header.
struct AccountIncarnationMiddleware: RouterMiddleware {
    let incarnations: AccountIncarnations

    func handle(
        _ request: Request,
        context: ServerRequestContext,
        next: (Request, ServerRequestContext) async throws -> Response
    ) async throws -> Response {
        let check = AccountIncarnationCheck(incarnations: incarnations, claimed: request.headers[.init(AccountIncarnationHeader.name)!])
        var context = context
        context.accountIncarnation = check
        var response = try await next(request, context)
        if let answered = check.answered.withLock({ $0 }) { response.headers[.init(AccountIncarnationHeader.name)!] = answered }
        return response
    }
}
