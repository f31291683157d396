import Foundation
import GroupDefaultsWire
import Hummingbird

/// `/v1/pairings`: the relay through which a device hands an encrypted suite's keys to a new one.
/// The server sees a pairing id derived from the one-time code, a public key, a proof and a sealed
/// bundle; never the code, never a key. The claim is the one request without a token: the pairing
/// id (128 bits derived from the code) is its credential, and it makes the new device's token.
struct PairingRoutes: Sendable {
    let storage: any PairingStore

    /// The biggest body a pairing request has: a sealed key file of many epochs fits in it.
    static let bodyLimit = 256 << 10

    /// `POST /v1/pairings`: registers a pairing for a suite the token covers.
    func create(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let token = context.token
        let body = try await JSONBody.decode(PairingRequest.self, from: request, limit: Self.bodyLimit)
        if let problem = NameKind.suite.problem(with: body.suite) { throw APIError.invalidSuite(problem) }
        try token.authorize(suite: body.suite, write: false)
        try Self.checkID(body.pairingID)
        let pairing = StoredPairing(
            lookup: StoredPairing.lookup(id: body.pairingID),
            account: token.account,
            suite: body.suite,
            creatorTokenID: token.id,
            readOnly: token.readOnly,
            created: Date()
        )
        try await storage.createPairing(pairing)
        return try JSONBody.response(pairing.state)
    }

    /// `POST /v1/pairings/{pairing_id}/claim`: the new device's public key and proof; answers its
    /// token, made in the same transaction as the claim. The token works for nothing until the
    /// device that made the code, having checked the proof, hands over the keys (`complete`); a
    /// proof it refuses cancels the pairing and revokes the token (`cancel`): a claim by someone
    /// who saw the pairing id but not the code gets nothing that ever works.
    func claim(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let id = try pairingID(context)
        let claim = try await JSONBody.decode(PairingClaim.self, from: request, limit: Self.bodyLimit)
        guard let key = Data(base64Encoded: claim.publicKey), key.count == 32, let proof = Data(base64Encoded: claim.proof), proof.count == 32
        else { throw APIError.malformed("public_key and proof are 32 bytes each, in base64") }
        if let name = claim.deviceName, let problem = NameKind.device.problem(with: name) { throw APIError.malformed(problem) }
        let lookup = StoredPairing.lookup(id: id)
        guard let pairing = try await storage.pairing(lookup: lookup) else { throw Self.notFound }
        // Made expired: `completePairing` gives it its lasting expiry once the keys are handed over.
        let (secret, token) = Tokens.make(
            account: pairing.account,
            suitePatterns: [pairing.suite],
            readOnly: pairing.readOnly,
            device: claim.deviceName,
            expires: pairing.created
        )
        let claimed = try await storage.claimPairing(lookup: lookup, claim: claim, token: token, now: Date())
        return try JSONBody.response(PairingClaimed(token: secret, suite: claimed.suite, expires: claimed.state.expires))
    }

    /// `GET /v1/pairings/{pairing_id}`: where the pairing stands, for a token of its account, or,
    /// without a token, for whoever knows the pairing id (the claiming device, whose token works
    /// only once the keys are here; the id is already the credential of the claim, and the keys
    /// are sealed to the claim's public key under the code).
    func state(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        if let token = context.token { return try JSONBody.response(try await own(token, context).state) }
        guard let pairing = try await storage.pairing(lookup: StoredPairing.lookup(id: try pairingID(context))) else { throw Self.notFound }
        return try JSONBody.response(pairing.state)
    }

    /// `DELETE /v1/pairings/{pairing_id}`: the token that made the pairing cancels it (a claim whose
    /// proof does not check out, or a change of mind): nothing can claim or complete it afterwards,
    /// and the claiming device's token, if any, is revoked at once.
    func cancel(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let pairing = try await own(context.token, context)
        guard pairing.creatorTokenID == context.token.id else {
            throw APIError.forbidden("only the token that made the pairing cancels it")
        }
        return try JSONBody.response(try await storage.cancelPairing(lookup: pairing.lookup, now: Date()).state)
    }

    /// `PUT /v1/pairings/{pairing_id}/keys`: the sealed keys, from the token that made the pairing;
    /// the claiming device's token then lasts as long as this one.
    func complete(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let pairing = try await own(context.token, context)
        guard pairing.creatorTokenID == context.token.id else {
            throw APIError.forbidden("only the token that made the pairing hands over its keys")
        }
        let body = try await JSONBody.decode(PairingKeys.self, from: request, limit: Self.bodyLimit)
        guard let bundle = Data(base64Encoded: body.bundle), bundle.count > 32 else {
            throw APIError.malformed("bundle must be base64 of the encapsulated key and the sealed keys")
        }
        let completed = try await storage.completePairing(
            lookup: pairing.lookup,
            bundle: body.bundle,
            now: Date(),
            tokenExpires: context.token.expires
        )
        return try JSONBody.response(completed.state)
    }

    /// The pairing of the path, if `token`'s account made it (else not found: another account's
    /// pairings do not exist for it).
    private func own(_ token: StoredToken, _ context: some RequestContext) async throws -> StoredPairing {
        let id = try pairingID(context)
        guard let pairing = try await storage.pairing(lookup: StoredPairing.lookup(id: id)), pairing.account.isSameName(as: token.account) else {
            throw Self.notFound
        }
        return pairing
    }

    private func pairingID(_ context: some RequestContext) throws -> String {
        let id = context.parameters.get("pairing") ?? ""
        try Self.checkID(id)
        return id
    }

    /// A pairing id (`what`: an invitation's too, derived from its code the same way) is 32
    /// lowercase hex digits.
    static func checkID(_ id: String, what: String = "a pairing id") throws {
        guard id.utf8.count == 32, id.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw APIError.malformed("\(what) is 32 lowercase hex digits")
        }
    }

    /// The same answer for a code never made, mistyped, or of another account: it reveals nothing.
    private static let notFound = APIError(.pairingNotFound, "no pairing has this code: check it, or make a new one")
}
