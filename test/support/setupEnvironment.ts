/**
 * Runs before every test file. Loading src/app.ts validates the settings, so the test process needs
 * a valid configuration before any function module is imported; tests that run the app point it at
 * their own local Cosmos server (see localStack.ts) before the first delivery. The placeholder
 * endpoint refuses connections, so a test that forgets fails fast instead of hanging.
 */
process.env.COSMOS_ENDPOINT ??= 'http://127.0.0.1:9/';
process.env.COSMOS_KEY ??= 'cGxhY2Vob2xkZXIta2V5LWZvci10ZXN0cw==';
delete process.env.APPLICATIONINSIGHTS_CONNECTION_STRING;

// @azure/functions announces test mode for every registration; expected here, so not repeated.
const warn = console.warn.bind(console);
console.warn = (...args: unknown[]): void => {
  const text = String(args[0]);
  if (
    text.startsWith('WARNING: Skipping call to register function') ||
    text.startsWith('WARNING: Failed to detect the Azure Functions runtime')
  ) {
    return;
  }
  warn(...args);
};
