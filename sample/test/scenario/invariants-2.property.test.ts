import { keepsEveryInvariant } from './invariants';

keepsEveryInvariant(2);
