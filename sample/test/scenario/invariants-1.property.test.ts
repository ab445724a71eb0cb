import { keepsEveryInvariant } from './invariants';

keepsEveryInvariant(1);
