/** Runs before every test file. */

// Tests never send telemetry to Azure, whatever the shell has.
delete process.env.APPLICATIONINSIGHTS_CONNECTION_STRING;
