/** Runs before every test file. */

// Tests never send telemetry to Azure, whatever the shell has.
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
