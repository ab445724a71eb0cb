/**
 * Import this first (`import '../support/appSettings';`) in a test that loads function modules.
 * Loading src/app.ts validates the settings, so the process needs a valid configuration before any
 * function module is imported; the test then points the app at its own local Cosmos server (see
 * localStack.ts) before the first delivery builds the app's client. The placeholder endpoint
 * refuses connections, so a test that forgets fails fast instead of reaching anything real.
 */
process.env.COSMOS_ENDPOINT = 'http://127.0.0.1:9/';
process.env.COSMOS_KEY = 'cGxhY2Vob2xkZXIta2V5LWZvci10ZXN0cw==';
