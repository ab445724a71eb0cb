/** Runs before every test file (jest's setupFiles), before anything the file imports. */

// Tests never send telemetry to Azure, whatever the shell has.
delete process.env.APPLICATIONINSIGHTS_CONNECTION_STRING;

// Loading src/app.ts validates the settings, so a test file that loads function modules needs a
// valid configuration before its first import; its local stack (localStack.ts) then points the app
// at a local Cosmos server before the first delivery builds the app's client. The placeholder
// endpoint refuses connections, so a test that forgets fails fast instead of reaching anything real.
process.env.COSMOS_ENDPOINT = 'http://127.0.0.1:9/';
process.env.COSMOS_KEY = 'cGxhY2Vob2xkZXIta2V5LWZvci10ZXN0cw==';
