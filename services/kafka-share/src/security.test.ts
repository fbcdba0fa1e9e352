import assert from "node:assert/strict";
import { createHash, createHmac, pbkdf2Sync, timingSafeEqual } from "node:crypto";
import { test } from "node:test";
import { saslOAuthBearer, saslScramSha, type Connection } from "@platformatic/kafka";
import { KafkaAuthenticationError, KafkaTlsError } from "./errors.ts";
import { connectionSecurity, securityFailure } from "./security.ts";

// The SCRAM client is @platformatic/kafka's (the Connection runs it on every connection). These
// tests hold it to RFC 5802 / RFC 7677 before it is trusted with passwords: the RFC's own vector,
// then a full exchange against a SCRAM server written here from the RFC, and the checks a client
// must make of the server.

type SASLAuthenticationAPI = Parameters<typeof saslScramSha.authenticate>[0];
type SaslAuthenticateResponse = Awaited<ReturnType<SASLAuthenticationAPI["async"]>>;

const RFC7677 = {
  user: "user",
  password: "pencil",
  clientNonce: "rOprNGfwEbeRWgbNEkqO",
  serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
  clientFinalWithoutProof: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
  proof: "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
  serverSignature: "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
};

test("SCRAM-SHA-256 primitives reproduce RFC 7677's proof and server signature", async () => {
  const def = saslScramSha.ScramAlgorithms["SHA-256"];
  const salted = await saslScramSha.hi(def, RFC7677.password, Buffer.from("W22ZaJ0SNY7soEsUEjb6gQ==", "base64"), 4096);
  const clientKey = saslScramSha.hmac(def, salted, "Client Key");
  const authMessage = `n=${RFC7677.user},r=${RFC7677.clientNonce},${RFC7677.serverFirst},${RFC7677.clientFinalWithoutProof}`;
  const proof = saslScramSha.xor(clientKey, saslScramSha.hmac(def, saslScramSha.h(def, clientKey), authMessage));
  assert.equal(proof.toString("base64"), RFC7677.proof);
  assert.equal(saslScramSha.hmac(def, saslScramSha.hmac(def, salted, "Server Key"), authMessage).toString("base64"), RFC7677.serverSignature);
});

type Algo = "sha256" | "sha512";

/** A SCRAM server after RFC 5802 §3, knowing only StoredKey and ServerKey (as a broker does). */
function scramServer(algo: Algo, password: string, opts: { iterations?: number; nonceSuffix?: string; forgeSignature?: boolean; foreignNonce?: boolean } = {}) {
  const salt = Buffer.from("W22ZaJ0SNY7soEsUEjb6gQ==", "base64");
  const iterations = opts.iterations ?? 4096;
  const salted = pbkdf2Sync(password, salt, iterations, algo === "sha256" ? 32 : 64, algo);
  const storedKey = createHash(algo).update(createHmac(algo, salted).update("Client Key").digest()).digest();
  const serverKey = createHmac(algo, salted).update("Server Key").digest();
  const seen: string[] = [];
  let clientFirstBare = "";
  let serverFirst = "";
  let verified = false;
  const api = ((_conn: Connection, bytes: Buffer, callback: (err: Error | null, res?: SaslAuthenticateResponse) => void) => {
    const msg = bytes.toString("utf8");
    seen.push(msg);
    const reply = (text: string): void => callback(null, { errorCode: 0, errorMessage: null, authBytes: Buffer.from(text), sessionLifetimeMs: 0n });
    if (seen.length === 1) {
      assert.ok(msg.startsWith("n,,"), "GS2 header: no channel binding, no authzid");
      clientFirstBare = msg.slice(3);
      const nonce = /(?:^|,)r=([^,]+)/.exec(clientFirstBare)![1]!;
      serverFirst = `r=${opts.foreignNonce ? "someoneelse" : nonce}${opts.nonceSuffix ?? "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"},s=${salt.toString("base64")},i=${iterations}`;
      return reply(serverFirst);
    }
    const withoutProof = msg.slice(0, msg.lastIndexOf(",p="));
    const proof = Buffer.from(msg.slice(msg.lastIndexOf(",p=") + 3), "base64");
    assert.equal(withoutProof, `c=biws,${/r=[^,]+/.exec(serverFirst)![0]}`);
    const authMessage = `${clientFirstBare},${serverFirst},${withoutProof}`;
    const clientSignature = createHmac(algo, storedKey).update(authMessage).digest();
    const clientKey = Buffer.from(proof.map((b, i) => b ^ clientSignature[i]!));
    verified = timingSafeEqual(createHash(algo).update(clientKey).digest(), storedKey);
    if (!verified) return reply("e=invalid-proof");
    const signature = createHmac(algo, serverKey)
      .update(opts.forgeSignature ? `${authMessage}x` : authMessage)
      .digest();
    return reply(`v=${signature.toString("base64")}`);
  }) as unknown as SASLAuthenticationAPI;
  return { api, seen, verified: () => verified };
}

const conn = {} as Connection;

for (const [algo, name] of [
  ["sha256", "SHA-256"],
  ["sha512", "SHA-512"],
] as const) {
  test(`SCRAM-${name}: a full exchange proves the password and checks the server's signature`, async () => {
    const server = scramServer(algo, "pencil");
    await saslScramSha.authenticate(server.api, conn, name, "user", "pencil");
    assert.equal(server.verified(), true);
    assert.match(server.seen[0]!, /^n,,n=user,r=[A-Za-z0-9_-]{16,}$/);
  });

  test(`SCRAM-${name}: a wrong password is refused by the server (e=invalid-proof)`, async () => {
    const server = scramServer(algo, "pencil");
    await assert.rejects(saslScramSha.authenticate(server.api, conn, name, "user", "crayon"), /invalid-proof/);
    assert.equal(server.verified(), false);
  });
}

test("SCRAM: a server that cannot sign with the password's keys is not believed", async () => {
  await assert.rejects(
    saslScramSha.authenticate(scramServer("sha512", "pencil", { forgeSignature: true }).api, conn, "SHA-512", "user", "pencil"),
    /Invalid server signature/,
  );
});

test("SCRAM: a server nonce that does not extend the client's, or too few iterations, is refused", async () => {
  await assert.rejects(
    saslScramSha.authenticate(scramServer("sha256", "pencil", { foreignNonce: true }).api, conn, "SHA-256", "user", "pencil"),
    /nonce does not start with client nonce/,
  );
  await assert.rejects(
    saslScramSha.authenticate(scramServer("sha256", "pencil", { iterations: 1024 }).api, conn, "SHA-256", "user", "pencil"),
    /at least 4096 iterations/,
  );
});

test("OAUTHBEARER sends the RFC 7628 initial response, asking the token provider each time", async () => {
  const sent: string[] = [];
  const api = ((_c: Connection, bytes: Buffer, cb: (e: Error | null, r?: SaslAuthenticateResponse) => void) => {
    sent.push(bytes.toString("utf8"));
    cb(null, { errorCode: 0, errorMessage: null, authBytes: Buffer.alloc(0), sessionLifetimeMs: 0n });
  }) as unknown as SASLAuthenticationAPI;
  let n = 0;
  const token = (): string => `tok-${++n}`;
  await saslOAuthBearer.authenticate(api, conn, token, {});
  await saslOAuthBearer.authenticate(api, conn, token, {});
  assert.deepEqual(sent, ["n,,\x01auth=Bearer tok-1\x01\x01", "n,,\x01auth=Bearer tok-2\x01\x01"]);
});

test("connectionSecurity maps TLS and SASL options onto the Connection's", () => {
  assert.deepEqual(connectionSecurity(undefined), {});
  const out = connectionSecurity({
    tls: { ca: "CA", cert: "C", key: "K", servername: "kafka.internal" },
    sasl: { mechanism: "scram-sha-512", username: "u", password: "p" },
  });
  assert.deepEqual(out.tls, { rejectUnauthorized: true, ca: "CA", cert: "C", key: "K" });
  assert.equal(out.tlsServerName, "kafka.internal");
  assert.deepEqual(out.sasl, { mechanism: "SCRAM-SHA-512", username: "u", password: "p" });
  assert.equal(connectionSecurity({ tls: { rejectUnauthorized: false } }).tls?.rejectUnauthorized, false);
});

test("an OAUTHBEARER error challenge fails authentication instead of passing as success", () => {
  const validator = connectionSecurity({ sasl: { mechanism: "oauthbearer", token: "t" } }).sasl?.authBytesValidator;
  assert.ok(validator);
  const results: Array<Error | null> = [];
  validator(Buffer.alloc(0), (err) => results.push(err));
  validator(Buffer.from('{"status":"invalid_token"}'), (err) => results.push(err));
  assert.equal(results[0], null);
  assert.match(String(results[1]?.message), /refused the OAUTHBEARER token \(invalid_token\)/);
  assert.ok(securityFailure(results[1], "b:1") instanceof KafkaAuthenticationError);
});

test("securityFailure: SASL refusals and untrusted certificates are typed; network trouble is not", () => {
  const refused = new Error("Connection to b:1 failed.", {
    cause: Object.assign(new Error("SASL authentication failed."), {
      code: "PLT_KFK_AUTHENTICATION",
      cause: Object.assign(new Error("Received response with error"), {
        errors: [{ serverErrorMessage: "Authentication failed: Invalid username or password" }],
      }),
    }),
  });
  const auth = securityFailure(refused, "b:1");
  assert.ok(auth instanceof KafkaAuthenticationError);
  assert.equal(auth.retriable, false);
  assert.equal(auth.message, "SASL authentication with b:1 failed: Authentication failed: Invalid username or password");
  const untrusted = securityFailure(
    new Error("Connection to b:1 failed.", {
      cause: Object.assign(new Error("unable to verify the first certificate"), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }),
    }),
    "b:1",
  );
  assert.ok(untrusted instanceof KafkaTlsError);
  assert.match(untrusted.message, /UNABLE_TO_VERIFY_LEAF_SIGNATURE/);
  assert.equal(securityFailure(new Error("x", { cause: Object.assign(new Error("refused"), { code: "ECONNREFUSED" }) }), "b:1"), undefined);
});
