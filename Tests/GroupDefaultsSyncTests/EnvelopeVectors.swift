/// Fixed vectors of the sealed-entry envelope, version 1 (`EnvelopeTests.vectors`): recovery secret
/// 00 01 … 0f, suite `group.com.example.chat`, key `sound` set to the string `ring.caf` at HLC
/// 0x01935A2B3C4D0001 by origin 998877665544, nonce 07 × 12. Changing them is changing the format:
/// a new version, not an edit.
enum EnvelopeVectors {
    static let recoveryKeyText = "000G-40R4-0M30-E209-185G-R38E-1WQS"
    static let soundKeyID = "df8f10bb7b4088ec29c930408bdf0c07"
    static let soundBox = "BwcHBwcHBwcHBwcHkC/rbj8cq2U9SUyoyw73eaFz+ABDxbmXjQ1P+A40wUZlsTTUobFYpMfB8Zad02pR"
}
