import { generate } from 'selfsigned';

/** A certificate for the administration endpoint and its key: PEM, in memory only, never written. */
export interface LocalCertificate {
  readonly cert: string;
  readonly key: string;
}

let generated: Promise<LocalCertificate> | undefined;

/**
 * A self-signed certificate for 127.0.0.1, ::1 and localhost, made once per process (tests start a
 * peer per test; an EC key is quick, but not free). A client trusts it by its PEM, which start()
 * returns: ServiceBusAdministrationClient's `tlsOptions: { ca }`.
 */
export function localCertificate(): Promise<LocalCertificate> {
  generated ??= generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 30 * 86_400_000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  }).then(({ cert, private: key }) => ({ cert, key }));
  return generated;
}
