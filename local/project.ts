import { join } from 'node:path';

/**
 * The project's root: the checkout whose functions/ local Azure loads, and which the build and the
 * tools read and change. The one place it is worked out.
 */
export const PROJECT_ROOT = join(__dirname, '..');
