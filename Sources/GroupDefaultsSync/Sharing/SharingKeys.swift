import Crypto
import Foundation
import GroupDefaultsWire

// @unchecked Sendable below: the keys are immutable values that swift-crypto does not mark Sendable.

/// The keys by which an end-to-end encrypted suite is shared between accounts (`SuiteKeys.sharing`).
///
/// The owner key (Ed25519) and the owner seal key are derived from the suite's recovery key, so
/// that every device of the owner's account has them (the first from the recovery key, the others
/// by pairing, which hands over the whole key file) and a member's never does. The owner key signs
/// each member's admission (its member key, `MemberAdmission`) and the shared part of every key bag
/// (`SharedKeyBag`); the owner seal key seals each epoch's key for the owner's devices. A member's
/// devices hold the owner key's public half, pinned when they joined through a channel only the
/// invitation code opens, and the member key (X25519), to which key bags seal each new epoch's key.
/// So a server (or a removed member) can neither read a new epoch's key nor make a device take a
/// key of its own: every bag a device takes carries the owner key's signature over what it holds.
struct SharingKeys: @unchecked Sendable {
    /// The owner key; nil on a member's devices.
    var owner: Curve25519.Signing.PrivateKey?
    /// The key that seals each epoch's key for the owner's devices (ChaCha20-Poly1305); nil on a
    /// member's devices.
    var ownerSeal: SymmetricKey?
    /// The owner key's public half, on every device.
    var ownerVerify: Curve25519.Signing.PublicKey
    /// The member account's key, on its devices; nil on the owner's.
    var member: Curve25519.KeyAgreement.PrivateKey?

    /// The owner's keys.
    init(owner: Curve25519.Signing.PrivateKey, ownerSeal: SymmetricKey) {
        self.init(owner: owner, ownerSeal: ownerSeal, ownerVerify: owner.publicKey)
    }

    init(owner: Curve25519.Signing.PrivateKey?, ownerSeal: SymmetricKey?, ownerVerify: Curve25519.Signing.PublicKey) {
        self.owner = owner
        self.ownerSeal = ownerSeal
        self.ownerVerify = ownerVerify
    }

    /// Whether these are the owner's keys (which vouch for members and rotate a shared suite).
    var isOwner: Bool { owner != nil && ownerSeal != nil }

    /// What a member's device holds: the owner key's public half, and no member key yet (the joining
    /// device adds its own).
    var forMember: SharingKeys { SharingKeys(owner: nil, ownerSeal: nil, ownerVerify: ownerVerify) }
}

// MARK: - Admissions

extension SuiteKeys {
    /// What the owner key signs to admit `account`'s member key into the suite at `epoch`.
    static func admissionMessage(suite: String, account: String, memberKey: Data, epoch: UInt32) -> Data {
        Data("GroupDefaults member admission v1\0\(suite)\0\(account)\0".utf8) + memberKey + withUnsafeBytes(of: epoch.bigEndian) { Data($0) }
    }

    /// `account`'s member key vouched for by the owner key, at the current epoch.
    ///
    /// - Throws: `SyncError` (`local`) on a device without the owner key.
    func admission(account: String, memberKey: Curve25519.KeyAgreement.PublicKey) throws(SyncError) -> MemberAdmission {
        guard let owner = sharing?.owner else { throw Self.notOwner(suite) }
        let key = memberKey.rawRepresentation
        do {
            let signature = try owner.signature(for: Self.admissionMessage(suite: suite, account: account, memberKey: key, epoch: currentEpoch))
            return MemberAdmission(memberKey: key.base64EncodedString(), epoch: currentEpoch, signature: signature.base64EncodedString())
        } catch {
            throw SyncError(.local, "cannot sign the admission of \(account): \(error)")
        }
    }

    /// `account`'s member key, if `admission` is signed by this suite's owner key; nil otherwise.
    func memberKey(of account: String, _ admission: MemberAdmission) -> Curve25519.KeyAgreement.PublicKey? {
        guard let verify = sharing?.ownerVerify, let key = Data(base64Encoded: admission.memberKey),
            let signature = Data(base64Encoded: admission.signature),
            verify.isValidSignature(signature, for: Self.admissionMessage(suite: suite, account: account, memberKey: key, epoch: admission.epoch))
        else { return nil }
        return try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: key)
    }

    static func notOwner(_ suite: String) -> SyncError {
        SyncError(
            .local,
            """
            this device does not hold the owner key of \(suite): only the owner's devices set up from its recovery key, or \
            paired with one, vouch for members and rotate a shared encrypted suite
            """
        )
    }
}

// MARK: - The shared part of a key bag

extension SuiteKeys {
    private static var bagSuite: HPKE.Ciphersuite { .Curve25519_SHA256_ChachaPoly }

    private func memberInfo(epoch: UInt32, account: String) -> Data {
        Data("GroupDefaults shared key bag v1\0\(suite)\0\(epoch)\0\(account)".utf8)
    }

    private func ownerSealData(epoch: UInt32) -> Data { Data("GroupDefaults owner seal v1\0\(suite)\0\(epoch)".utf8) }

    /// What the owner key signs of `bag` for `epoch`: every sealed copy and whom it is for, the
    /// copies in the byte order of their accounts.
    static func sharedBagMessage(suite: String, epoch: UInt32, bag: SharedKeyBag) -> Data {
        sharedBagMessage(suite: suite, epoch: epoch, bag: bag, copies: bag.members.sorted { $0.account.exact < $1.account.exact })
    }

    /// The message a bag signed by an earlier version covers: its copies in the order of Swift's
    /// `String <` of their accounts, which differs from byte order for some names outside ASCII.
    private static func legacyBagMessage(suite: String, epoch: UInt32, bag: SharedKeyBag) -> Data {
        sharedBagMessage(suite: suite, epoch: epoch, bag: bag, copies: bag.members.sorted { $0.account < $1.account })
    }

    private static func sharedBagMessage(suite: String, epoch: UInt32, bag: SharedKeyBag, copies: [SharedKeyBag.SealedCopy]) -> Data {
        func field(_ bytes: some Collection<UInt8>) -> Data { withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Data($0) } + Data(bytes) }
        var message = Data("GroupDefaults shared key bag v1\0".utf8) + field(Array(suite.utf8))
        message += withUnsafeBytes(of: epoch.bigEndian) { Data($0) }
        message += field(Array(bag.owner.utf8))
        for copy in copies {
            message += field(Array(copy.account.utf8)) + field(Array(copy.sealed.utf8))
        }
        return message
    }

    /// Whether `verify` signed `bag` for `epoch`, in this version's order or an earlier one's
    /// (both cover the same copies and accounts).
    static func isSigned(_ bag: SharedKeyBag, suite: String, epoch: UInt32, by verify: Curve25519.Signing.PublicKey) -> Bool {
        guard let signature = Data(base64Encoded: bag.signature) else { return false }
        return verify.isValidSignature(signature, for: sharedBagMessage(suite: suite, epoch: epoch, bag: bag))
            || verify.isValidSignature(signature, for: legacyBagMessage(suite: suite, epoch: epoch, bag: bag))
    }

    /// The shared part of `epoch`'s key bag: its key sealed for the owner's devices and to each of
    /// `members`' keys (HPKE, base mode), signed by the owner key.
    ///
    /// - Throws: `SyncError` (`local`) on a device without the owner key or the epoch's key.
    func sharedKeyBag(epoch: UInt32, members: [ExactName: Curve25519.KeyAgreement.PublicKey]) throws(SyncError) -> SharedKeyBag {
        guard let owner = sharing?.owner, let ownerSeal = sharing?.ownerSeal else { throw Self.notOwner(suite) }
        guard let key = epochs[epoch] else { throw SyncError(.local, "these keys have no epoch \(epoch)") }
        let raw = key.withUnsafeBytes { Data($0) }
        do {
            var bag = SharedKeyBag(
                owner: try ChaChaPoly.seal(raw, using: ownerSeal, authenticating: ownerSealData(epoch: epoch)).combined.base64EncodedString(),
                members: [],
                signature: ""
            )
            for (account, memberKey) in members.sorted(by: { $0.key < $1.key }) {
                var sender = try HPKE.Sender(
                    recipientKey: memberKey,
                    ciphersuite: Self.bagSuite,
                    info: memberInfo(epoch: epoch, account: account.text)
                )
                let sealed = (sender.encapsulatedKey + (try sender.seal(raw))).base64EncodedString()
                bag.members.append(SharedKeyBag.SealedCopy(account: account.text, sealed: sealed))
            }
            bag.signature = try owner.signature(for: Self.sharedBagMessage(suite: suite, epoch: epoch, bag: bag)).base64EncodedString()
            return bag
        } catch {
            throw SyncError(.local, "cannot seal the key of epoch \(epoch) for the suite's accounts: \(error)")
        }
    }

    /// The key of `epoch` in `bag`, if the owner key signed the bag and it opens on this device
    /// (with the owner seal key, or with this member's key); nil otherwise.
    func open(_ bag: SharedKeyBag, epoch: UInt32) -> SymmetricKey? {
        guard let sharing, Self.isSigned(bag, suite: suite, epoch: epoch, by: sharing.ownerVerify) else { return nil }
        var opened: Data?
        if let ownerSeal = sharing.ownerSeal, let sealed = Data(base64Encoded: bag.owner), let box = try? ChaChaPoly.SealedBox(combined: sealed) {
            opened = try? ChaChaPoly.open(box, using: ownerSeal, authenticating: ownerSealData(epoch: epoch))
        }
        if opened == nil, let member = sharing.member {
            for copy in bag.members {
                let (account, text) = (copy.account, copy.sealed)
                guard let bytes = Data(base64Encoded: text), bytes.count > 32,
                    var recipient = try? HPKE.Recipient(
                        privateKey: member,
                        ciphersuite: Self.bagSuite,
                        info: memberInfo(epoch: epoch, account: account),
                        encapsulatedKey: bytes.prefix(32)
                    ),
                    let key = try? recipient.open(bytes.dropFirst(32))
                else { continue }
                opened = key
                break
            }
        }
        guard let opened, opened.count == 32 else { return nil }
        return SymmetricKey(data: opened)
    }

    /// These keys with each epoch after their newest that `bags` hands to this device (the shared
    /// part of its bag signed by the owner key and opening here), in order; nil when there is none.
    /// A bag that does not check out is passed over, and so is every later one.
    func adopting(_ bags: KeyBags) -> SuiteKeys? {
        var epochs = self.epochs
        var epoch = currentEpoch + 1
        while let bag = bags.shared[String(epoch)], let key = open(bag, epoch: epoch) {
            epochs[epoch] = key
            epoch += 1
        }
        return epochs.count > self.epochs.count ? with(epochs: epochs) : nil
    }

    /// The accounts the newest shared bag in `bags` whose signature checks out was sealed to, and
    /// its epoch; nil when there is none.
    func sharedRoster(_ bags: KeyBags) -> (epoch: UInt32, accounts: Set<ExactName>)? {
        guard let verify = sharing?.ownerVerify else { return nil }
        let checked = bags.shared.compactMap { epochText, bag -> (UInt32, Set<ExactName>)? in
            guard let epoch = UInt32(epochText), Self.isSigned(bag, suite: suite, epoch: epoch, by: verify) else { return nil }
            return (epoch, Set(bag.accounts.map(\.exact)))
        }
        return checked.max { $0.0 < $1.0 }.map { (epoch: $0.0, accounts: $0.1) }
    }
}

// MARK: - Handing the keys to a member's device

extension InvitationCode {
    /// The joining device's proof that it knows the code: HMAC-SHA256 of its member key.
    func proof(of memberKey: Data) -> Data { Data(HMAC<SHA256>.authenticationCode(for: memberKey, using: derive("claim proof"))) }

    /// Whether `proof` is the proof of `memberKey`, compared in constant time.
    func verifies(_ proof: Data, of memberKey: Data) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(proof, authenticating: memberKey, using: derive("claim proof"))
    }

    /// The pre-shared key of the keys' HPKE seal (mode psk): only a holder of the code seals what
    /// the joining device opens.
    var presharedKey: SymmetricKey { derive("hpke psk") }

    private static func offer(suite: String, role: SuiteRole, encrypted: Bool) -> Data {
        Data("GroupDefaults invitation offer v1\0\(suite)\0\(role.rawValue)\0\(encrypted ? "encrypted" : "plain")".utf8)
    }

    /// What the inviting device says the invitation offers, authenticated with a key derived from
    /// the code (HMAC-SHA256, base64): `InvitationRequest.offerMAC`.
    func offerMAC(suite: String, role: SuiteRole, encrypted: Bool) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Self.offer(suite: suite, role: role, encrypted: encrypted), using: derive("offer")))
            .base64EncodedString()
    }

    /// Whether the server's description of the invitation is what the inviting device made
    /// (`offerMAC`), compared in constant time.
    func verifies(offer info: InvitationInfo) -> Bool {
        guard let mac = info.offerMAC.flatMap({ Data(base64Encoded: $0) }) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(
            mac,
            authenticating: Self.offer(suite: info.suite, role: info.role, encrypted: info.encrypted == true),
            using: derive("offer")
        )
    }
}

/// Hands an encrypted suite's keys to the first device of a member account when it accepts its
/// invitation, as pairing does within an account: the joining device makes its member key and
/// sends its public half with a proof made from the code; the owner's device checks the proof,
/// vouches for the key (`MemberAdmission`) and seals the keys to it (HPKE, mode psk, the
/// pre-shared key derived from the code), keeping the owner's private keys back.
enum KeyHandover {
    private static var ciphersuite: HPKE.Ciphersuite { .Curve25519_SHA256_ChachaPoly }
    private static let presharedKeyID = Data("GroupDefaults invitation".utf8)

    private static func info(suite: String, invitationID: String) -> Data {
        Data("GroupDefaults invitation keys v1\0\(suite)\0\(invitationID)".utf8)
    }

    /// The joining device's claim: a new member key, and its public half with the code's proof.
    static func claim(code: InvitationCode) -> (memberKey: Curve25519.KeyAgreement.PrivateKey, claim: InvitationClaim) {
        let key = Curve25519.KeyAgreement.PrivateKey()
        let publicKey = key.publicKey.rawRepresentation
        return (key, InvitationClaim(memberKey: publicKey.base64EncodedString(), proof: code.proof(of: publicKey).base64EncodedString()))
    }

    /// The claim's member key, if its proof was made from `code`; nil otherwise.
    static func checkedMemberKey(_ claim: InvitationClaim, code: InvitationCode) -> Curve25519.KeyAgreement.PublicKey? {
        guard let key = Data(base64Encoded: claim.memberKey), let proof = Data(base64Encoded: claim.proof), code.verifies(proof, of: key)
        else { return nil }
        return try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: key)
    }

    /// The keys a member's device gets (`keys` without the owner's private keys), sealed to
    /// `memberKey`, base64.
    static func seal(_ keys: SuiteKeys, to memberKey: Curve25519.KeyAgreement.PublicKey, code: InvitationCode) throws(SyncError) -> String {
        guard let sharing = keys.sharing else { throw SuiteKeys.notOwner(keys.suite) }
        do {
            var sender = try HPKE.Sender(
                recipientKey: memberKey,
                ciphersuite: ciphersuite,
                info: info(suite: keys.suite, invitationID: code.invitationID),
                presharedKey: code.presharedKey,
                presharedKeyIdentifier: presharedKeyID
            )
            let bytes = try keys.with(sharing: sharing.forMember).fileBytes()
            return (sender.encapsulatedKey + (try sender.seal(bytes))).base64EncodedString()
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.local, "cannot seal the keys for the member's device: \(error)")
        }
    }

    /// The keys in `bundle`, opened with `memberKey`, which they then hold.
    ///
    /// - Throws: `SyncError` (`local`) when they do not open (not sealed by a holder of the code),
    ///   or are not `suite`'s.
    static func open(
        _ bundle: String,
        memberKey: Curve25519.KeyAgreement.PrivateKey,
        code: InvitationCode,
        suite: String
    ) throws(SyncError) -> SuiteKeys {
        let opened: Data
        do {
            guard let bytes = Data(base64Encoded: bundle), bytes.count > 32 else { throw SyncError(.protocolError, "not base64") }
            var recipient = try HPKE.Recipient(
                privateKey: memberKey,
                ciphersuite: ciphersuite,
                info: info(suite: suite, invitationID: code.invitationID),
                encapsulatedKey: bytes.prefix(32),
                presharedKey: code.presharedKey,
                presharedKeyIdentifier: presharedKeyID
            )
            opened = try recipient.open(bytes.dropFirst(32))
        } catch {
            throw SyncError(.local, "the suite's keys the server relayed do not open: they were not sealed by the device that made the invitation")
        }
        let keys = try SuiteKeys(fileBytes: opened, suite: suite, source: "the keys the owner's device sent")
        guard var sharing = keys.sharing, !sharing.isOwner else {
            throw SyncError(.local, "the keys the owner's device sent cannot be shared (they have no owner verify key)")
        }
        sharing.member = memberKey
        return keys.with(sharing: sharing)
    }
}
